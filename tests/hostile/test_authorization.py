"""Who may change a workload, table-driven over the real bot, the sim, the emulator and Redis.

The owner may release and extend their workload, by command or by its thread's buttons; another user may
not (and nothing gpubot could write on the pod changes); an admin may. Over quota is refused. A pod
that gpubot did not make (no managed-by label), even one with a gpubot workload's name and gpubot's
annotations copied onto it, is never touched by a release, an extend, a button or the reaper. Ownership
is the exact Slack user id, never the label-safe owner label, so two ids that squeeze into one label
value cannot reach each other's pods.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bot import runtime, settings
from bot.adapters import slack_chat
from bot.core import labels, podspec
from bot.services import reaper
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import DEFAULT_USERS, User
from tests.integration.botkit import (
    CUDA,
    WAIT,
    Json,
    advance_until,
    advance_watched,
    bot_settings,
    emulator_config,
    gpubot_pods,
    roots,
    running_bot,
    wait_for_pods,
)

OWNER, OTHER, ADMIN = "U_ALICE", "U_BOB", "U_ADMIN"
EVE = "U:EVE"
"""No real Slack id has a `:`; one that did would be squeezed into a label value with a hash suffix."""
EVE_TWIN = labels.to_label_value(EVE)
"""A user whose exact id is Eve's owner label value."""
NEVER = 3600.0
RELEASE_BUTTON, EXTEND_BUTTON = "gpubot_release", "gpubot_extend"


@pytest.fixture
def slack(slack_env: None) -> Iterator[BackgroundSlack]:
    with BackgroundSlack(
        emulator_config((*DEFAULT_USERS, User(EVE, "eve"), User(EVE_TWIN, "twin")))
    ) as running:
        yield running


@pytest.fixture
def bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[runtime.Bot]:
    """The real bot on the sim's clock, its reaper driven by the test (`bot.reap()`), Ada an admin."""
    config = bot_settings(sim, slack, tmp_path, redis_url)
    config = dataclasses.replace(config, reaper=settings.ReaperSettings(interval_seconds=NEVER))
    with running_bot(config, slack, clock=sim.world.clock.datetime) as running:
        slack.wait_until(lambda: running.leading, timeout=WAIT)
        yield running


def pod_named(sim: world.BackgroundWorld, name: str) -> Json | None:
    return next((p for p in sim.pods() if p["metadata"]["name"] == name), None)


def start(sim: world.BackgroundWorld, slack: BackgroundSlack, user: str, name: str) -> Json:
    """`user` runs a one-GPU workload called `name`; its thread root, once the pod exists."""
    before = len(gpubot_pods(sim))  # counted before the command: its pod may come before the count
    delivery = slack.type_command(user, "C_GPU", "/gpu", f"run {CUDA} --name {name} -- sleep 3600")
    assert delivery.acked and "Requesting" in (delivery.ack_payload or {}).get("text", "")
    wait_for_pods(sim, slack, before + 1)
    pod = pod_named(sim, name)
    assert pod is not None
    ts = pod["metadata"]["annotations"][labels.THREAD_TS_ANNOTATION]
    (root,) = [r for r in roots(slack) if r["ts"] == ts]
    # The root gets its buttons with the first news (the autoscaler's verdict), on the sim's clock.
    advance_until(sim, slack, lambda: has_button(slack, ts, RELEASE_BUTTON))
    return root


def touchable(pod: Json | None) -> tuple[Any, ...] | None:
    """What gpubot could change on a pod: labels, annotations, deletion (the kubelet moves the rest)."""
    if pod is None:
        return None
    metadata = pod["metadata"]
    return metadata.get("labels"), metadata.get("annotations"), metadata.get("deletionTimestamp")


def has_button(slack: BackgroundSlack, ts: str, action_id: str) -> bool:
    message = next((m for m in slack.messages("C_GPU") if m["ts"] == ts), None)
    return message is not None and action_id in str(message["blocks"])


def told(slack: BackgroundSlack, user: str) -> list[str]:
    """What the bot told `user` by chat.postEphemeral (acks are shown as ephemerals too; not these)."""
    return [e["text"] for e in slack.ephemerals(user) if e["source"] == "chat.postEphemeral"]


def answer_to(slack: BackgroundSlack, user: str, act: Callable[[], Any]) -> str:
    """Do `act` and return what it tells `user` (every release, extend and refusal answers the actor)."""
    before = len(told(slack, user))
    act()
    found = slack.wait_until(lambda: told(slack, user)[before:], timeout=WAIT)
    return found[-1]


ACTORS = {"owner": OWNER, "other": OTHER, "admin": ADMIN}
MATRIX = [
    (actor, action, via)
    for actor in ACTORS
    for action in ("release", "extend")
    for via in ("command", "button")
]


@pytest.mark.parametrize(("actor", "action", "via"), MATRIX)
def test_who_may_release_and_extend(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, actor: str, action: str, via: str
) -> None:
    root = start(sim, slack, OWNER, "training-1")
    before = pod_named(sim, "training-1")
    assert before is not None
    user = ACTORS[actor]

    def act() -> None:
        if via == "command":
            hours = " 2" if action == "extend" else ""
            slack.type_command(user, "C_GPU", "/gpu", f"{action} training-1{hours}")
        else:
            button = RELEASE_BUTTON if action == "release" else EXTEND_BUTTON
            slack.click_button(user, "C_GPU", root["ts"], button)

    said = answer_to(slack, user, act)
    after = pod_named(sim, "training-1")
    if actor == "other":
        assert "only its owner or an admin may" in said and action in said
        assert after is not None and touchable(after) == touchable(before)
    elif action == "release":
        assert said == "Released `training-1`. Its pod is stopping; the thread says when the GPU is back."
        assert after is None or after["metadata"].get("deletionTimestamp")
    else:
        assert said.startswith("Extended `training-1` by")
        assert after is not None
        end = podspec.parse_time(after["metadata"]["annotations"][labels.LEASE_END_ANNOTATION])
        was = podspec.parse_time(before["metadata"]["annotations"][labels.LEASE_END_ANNOTATION])
        assert end is not None and was is not None and end > was
        audit = after["metadata"]["annotations"][labels.AUDIT_ANNOTATION]
        assert f'"action":"extend","actor":"{user}"' in audit


def test_over_quota_is_refused_and_creates_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    start(sim, slack, OWNER, "first")
    start(sim, slack, OWNER, "second")
    third = f"run {CUDA} --name third -- sleep 1"
    said = answer_to(slack, OWNER, lambda: slack.type_command(OWNER, "C_GPU", "/gpu", third))
    assert "Your GPU quota is 2; you already hold 2" in said
    assert sorted(p["metadata"]["name"] for p in gpubot_pods(sim)) == ["first", "second"]
    start(sim, slack, ADMIN, "mine")  # quota is per user: another's run goes ahead
    assert len(gpubot_pods(sim)) == 3


def foreign_pod(name: str, *, thread_ts: str) -> Any:
    """A pod made by hand in gpubot's namespace, dressed as alice's expired workload but for managed-by."""
    notes = {
        labels.REQUESTER_ANNOTATION: OWNER,
        labels.CHANNEL_ANNOTATION: "C_GPU",
        labels.THREAD_TS_ANNOTATION: thread_ts,
        labels.LEASE_END_ANNOTATION: "2000-01-01T00:00:00Z",
        labels.REQUESTED_AT_ANNOTATION: "2000-01-01T00:00:00Z",
        labels.AUDIT_ANNOTATION: '[{"action":"release","actor":"U_ALICE","at":"2000-01-01T00:00:00Z"}]',
    }
    return {  # a plain dict is sent as it is, as kubectl sends a manifest
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {labels.OWNER_LABEL: OWNER, labels.COMPONENT_LABEL: labels.COMPONENT_VALUE},
            "annotations": notes,
        },
        "spec": {"containers": [{"name": "main", "image": "ubuntu", "command": ["sleep", "infinity"]}]},
    }


FOREIGN_ACTS: dict[str, Callable[[BackgroundSlack, str], Any]] = {
    "owner releases it by name": lambda s, ts: s.type_command(OWNER, "C_GPU", "/gpu", "release training-1"),
    "admin releases it by name": lambda s, ts: s.type_command(ADMIN, "C_GPU", "/gpu", "release training-1"),
    "owner extends it by name": lambda s, ts: s.type_command(OWNER, "C_GPU", "/gpu", "extend training-1 2"),
    "admin extends it by name": lambda s, ts: s.type_command(ADMIN, "C_GPU", "/gpu", "extend training-1 2"),
    "a Release button carrying its name": lambda s, ts: s.click_button(
        ADMIN, "C_GPU", ts, RELEASE_BUTTON, "default/training-1"
    ),
    "an Extend button carrying its name": lambda s, ts: s.click_button(
        OWNER, "C_GPU", ts, EXTEND_BUTTON, "default/training-1"
    ),
}


@pytest.mark.parametrize("act", sorted(FOREIGN_ACTS))
def test_a_pod_gpubot_did_not_make_is_never_touched(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bot: runtime.Bot,
    core: client.CoreV1Api,
    act: str,
) -> None:
    old_root = start(sim, slack, OWNER, "training-1")  # gpubot's own pod of that name, released, gone
    assert answer_to(slack, OWNER, lambda: slack.type_command(OWNER, "C_GPU", "/gpu", "release training-1"))
    slack.wait_until(lambda: pod_named(sim, "training-1") is None, timeout=WAIT)
    live_root = start(sim, slack, OWNER, "other-work")  # a live thread whose buttons can be tampered with
    core.create_namespaced_pod("default", foreign_pod("training-1", thread_ts=old_root["ts"]))
    before = pod_named(sim, "training-1")
    assert before is not None

    user = ADMIN if act.startswith(("admin", "a Release")) else OWNER
    said = answer_to(slack, user, lambda: FOREIGN_ACTS[act](slack, live_root["ts"]))
    assert said == "There is no gpubot workload `training-1`. Try: `/gpu status`"
    for _ in range(6):  # the reaper's rounds, long past that lease and its grace
        advance_watched(sim, 600)
        bot.reap()
    assert touchable(pod_named(sim, "training-1")) == touchable(before)
    assert pod_named(sim, "other-work") is not None  # gpubot's own pod, with its lease, is still there


def test_release_all_and_the_reaper_leave_a_foreign_pod_alone(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, core: client.CoreV1Api
) -> None:
    start(sim, slack, OWNER, "mine")
    core.create_namespaced_pod("default", foreign_pod("not-mine", thread_ts="1.000001"))
    before = pod_named(sim, "not-mine")
    said = answer_to(slack, OWNER, lambda: slack.type_command(OWNER, "C_GPU", "/gpu", "release all"))
    assert said == "Released `mine`. Its pod is stopping; the thread says when the GPU is back."
    for _ in range(6):
        advance_watched(sim, 600)
        bot.reap()
    assert before is not None and touchable(pod_named(sim, "not-mine")) == touchable(before)


def test_two_ids_that_share_an_owner_label_cannot_reach_each_others_pods(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    start(sim, slack, EVE, "eves")
    (pod,) = gpubot_pods(sim)
    assert pod["metadata"]["labels"][labels.OWNER_LABEL] == EVE_TWIN  # sanitised, as its twin's exact id
    assert pod["metadata"]["annotations"][labels.REQUESTER_ANNOTATION] == EVE  # the exact id rules
    for text in ("release", "release all", "release eves", "extend eves 2", "extend 2"):
        said = answer_to(
            slack, EVE_TWIN, functools.partial(slack.type_command, EVE_TWIN, "C_GPU", "/gpu", text)
        )
        assert "Released" not in said and "Extended" not in said, (text, said)
    assert touchable(pod_named(sim, "eves")) == touchable(pod)
    assert answer_to(slack, EVE, lambda: slack.type_command(EVE, "C_GPU", "/gpu", "release")) == (
        "Released `eves`. Its pod is stopping; the thread says when the GPU is back."
    )


def test_a_stale_view_never_deletes_a_namesake(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, core: client.CoreV1Api
) -> None:
    """The reaper acts on the informers' view, which lags the cluster. Between gpubot's pod going and the
    informer hearing of it, a hand-made pod may take the name: a delete the reaper still has to finish
    (a release recorded on the pod, its delete cut short) must not land on that one."""
    start(sim, slack, OWNER, "training-1")
    gpubot_pod = bot.cluster.get_workload("default", "training-1")
    assert gpubot_pod is not None
    release = podspec.release_audit_entry(OWNER, owner_id=OWNER, now=sim.world.clock.datetime())
    notes = {labels.AUDIT_ANNOTATION: podspec.append_audit(gpubot_pod.audit, release)}
    bot.cluster.annotate_pod("default", "training-1", notes)
    stale = bot.cluster.get_workload("default", "training-1")  # the view a lagging informer would still hold
    assert stale is not None and podspec.delete_recorded(stale.audit)
    core.delete_namespaced_pod("training-1", "default", grace_period_seconds=0)
    core.create_namespaced_pod("default", foreign_pod("training-1", thread_ts="1.000001"))
    namesake = pod_named(sim, "training-1")

    lagging = reaper.Reaper(
        bot.cluster,
        slack_chat.OutboxChat(bot.outbox),
        settings.Settings(slack=settings.SlackSettings(bot_token="unused")).reaper_policy(),
        namespace="default",
        live_workloads=lambda: [stale],
        clock=sim.world.clock.datetime,
    )
    lagging.run_once()
    assert namesake is not None and touchable(pod_named(sim, "training-1")) == touchable(namesake)


FORGED_VALUES = ["", "default/", "/training-1", "training-1", "default/training-1/x", "default/../x"]


@pytest.mark.parametrize(
    ("button", "value"),
    [(RELEASE_BUTTON, v) for v in FORGED_VALUES] + [(EXTEND_BUTTON, ""), (EXTEND_BUTTON, "default/")],
)
def test_a_button_whose_value_names_no_workload_changes_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, button: str, value: str
) -> None:
    """Issue 21: a forged Release with an empty value released the clicker's own only workload, as
    `/gpu release` with no name does. The owner's own click, so only the value can refuse it."""
    root = start(sim, slack, OWNER, "training-1")
    before = pod_named(sim, "training-1")
    said = answer_to(slack, OWNER, lambda: slack.click_button(OWNER, "C_GPU", root["ts"], button, value))
    assert said == "That button does not name a gpubot workload; nothing was changed."
    assert before is not None and touchable(pod_named(sim, "training-1")) == touchable(before)
