"""The bot end to end: Socket Mode envelopes from the Slack emulator, real Bolt, the real client on the sim.

The sim runs a manual clock, so a scale-up from zero takes milliseconds; tests wait on the emulator's
activity (or the sim's state checked on it), never on fixed sleeps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_bolt.adapter.socket_mode import SocketModeHandler

from bot import app, settings
from bot.adapters import slack_render
from bot.core import labels
from handlers import actions
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig

CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
RUN = f"run {CUDA} -- sleep 3600"
WAIT = 10.0
"""Real seconds to wait for the bot; only reached when something is broken."""
Json = dict[str, Any]


pytestmark = pytest.mark.usefixtures("slack_env")


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False), socket_mode=SocketModeConfig(ack_timeout=3.0)
    )
    with BackgroundSlack(config) as running:
        yield running


def bot_settings(sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path) -> settings.Settings:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    return settings.Settings(
        slack=settings.SlackSettings(
            bot_token=slack.bot_token, app_token=slack.app_token, api_base_url=slack.api_url
        ),
        cluster=settings.ClusterSettings(kubeconfig=str(kubeconfig)),
        quota=settings.QuotaSettings(admins=frozenset({"U_ADMIN"})),
    )


@contextlib.contextmanager
def running_bot(config: settings.Settings, slack: BackgroundSlack) -> Iterator[app.Bot]:
    """The real bot, in-process: informers synced, threads resumed, one Socket Mode connection."""
    bot = app.build(config)
    bot.start(sync_timeout=WAIT)
    handler = SocketModeHandler(bot.app, config.slack.app_token)
    handler.connect()  # type: ignore[no-untyped-call]
    before = slack.connections()
    slack.wait_until(lambda: slack.connections() > before or slack.connections(), timeout=WAIT)
    try:
        yield bot
    finally:
        handler.close()  # type: ignore[no-untyped-call]
        bot.stop()


@pytest.fixture
def bot(sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path) -> Iterator[app.Bot]:
    with running_bot(bot_settings(sim, slack, tmp_path), slack) as running:
        yield running


# -- reading the transcript -------------------------------------------------------------------------


def roots(slack: BackgroundSlack, channel: str = "C_GPU") -> list[Json]:
    return [m for m in slack.messages(channel) if not m["thread_ts"] and m["bot_id"]]


def replies(slack: BackgroundSlack, root: Json) -> list[str]:
    return [m["text"] for m in slack.messages(root["channel"]) if m["thread_ts"] == root["ts"]]


def the_root(slack: BackgroundSlack) -> Json:
    (root,) = roots(slack)
    return root


def checklist(message: Json) -> list[str]:
    steps = next((b for b in message["blocks"] if b.get("block_id") == "gpubot_steps"), None)
    return steps["text"]["text"].split("\n") if steps else []


def gpubot_pods(sim: world.BackgroundWorld) -> list[Json]:
    return [
        p
        for p in sim.pods()
        if p["metadata"]["labels"].get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
    ]


def advance_until(
    sim: world.BackgroundWorld, slack: BackgroundSlack, done: Callable[[], Any], *, limit: float = 900
) -> Any:
    """Move the sim clock 5 s at a time until `done()` holds, letting the bot catch up after each step."""
    moved = 0.0
    while moved <= limit:
        with contextlib.suppress(TimeoutError):
            return slack.wait_until(done, timeout=0.3)
        sim.advance(5, step=1)
        moved += 5
    shown = [m["text"] for m in slack.messages("C_GPU")]
    raise AssertionError(f"not reached within {limit} simulated seconds; channel shows {shown}")


def headline_is(slack: BackgroundSlack, words: str) -> Callable[[], bool]:
    return lambda: any(words in m["text"] for m in roots(slack))


def step_reached(slack: BackgroundSlack, words: str) -> Callable[[], bool]:
    """The root's checklist shows the step done or current (pending steps have a white circle)."""
    return lambda: any(
        words in line and not line.startswith(":white_circle:") for m in roots(slack) for line in checklist(m)
    )


def run_and_wait_for_thread(sim: world.BackgroundWorld, slack: BackgroundSlack) -> Json:
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    assert delivery.acked and delivery.shown == "ephemeral"
    assert delivery.ack_payload is not None and "Requesting 1 GPU" in delivery.ack_payload["text"]
    slack.wait_until(lambda: gpubot_pods(sim) and roots(slack), timeout=WAIT)
    advance_until(sim, slack, headline_is(slack, "Waiting for a GPU node"))
    return the_root(slack)


# -- the story ----------------------------------------------------------------------------------------


def test_run_walks_the_thread_through_every_step(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    (pod,) = gpubot_pods(sim)
    metadata, spec = pod["metadata"], pod["spec"]
    assert metadata["labels"][labels.OWNER_LABEL] == "U_ALICE"
    assert metadata["labels"][labels.PROFILE_LABEL] == "t4"
    notes = metadata["annotations"]
    assert (notes[labels.CHANNEL_ANNOTATION], notes[labels.THREAD_TS_ANNOTATION]) == ("C_GPU", root["ts"])
    assert notes[labels.COMMAND_ANNOTATION] == f"/gpu {RUN}"
    assert '"action":"run"' in notes[labels.AUDIT_ANNOTATION]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert spec["nodeSelector"] == {"app-type": "gpu-workloads"}
    container = spec["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["command"] == ["sleep", "3600"]

    for step in (
        "scale-up triggered",
        "provisioning",
        "is Ready",
        "GPU allocatable",
        "scheduled on",
        "Running",
    ):
        advance_until(sim, slack, step_reached(slack, step))

    root = the_root(slack)
    heads = [r["text"] for r in root["revisions"]]
    order = ["asked for", "Waiting for a GPU node", "Scale-up triggered", "provisioning", "Ready", "Running"]
    positions = [next(i for i, h in enumerate(heads) if word in h) for word in order]
    assert positions == sorted(positions), heads
    lines = checklist(root)
    assert len(lines) == 8 and all(line.startswith(":white_check_mark:") for line in lines), lines
    for line, word in zip(
        lines,
        ["waiting for a GPU node", "scale-up triggered", "provisioning", "is Ready", "GPU allocatable",
         "scheduled on", "pulling the image", "Running"],
        strict=True,
    ):  # fmt: skip
        assert word in line, lines
    assert " · " in lines[1] and "after the request" in lines[-1]
    said = slack.wait_until(lambda: (r := replies(slack, root)) and r[-1] == "Running" and r, timeout=WAIT)
    assert said[0].startswith("Scale-up triggered: gpu-pool 0→1"), said
    assert any("is Ready" in text for text in said)
    assert len(gpubot_pods(sim)) == 1


def test_status_release_and_the_owner_check(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    name = gpubot_pods(sim)[0]["metadata"]["name"]
    advance_until(sim, slack, headline_is(slack, "Scale-up triggered"))

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    report = slack.wait_until(
        lambda: [e for e in slack.ephemerals("U_ALICE") if "Your workloads" in e["text"]]
    )
    text = report[0]["text"]
    assert f"`{name}` — Pending, no node yet" in text and "1 GPU (t4)" in text and "lease 3h5" in text
    assert "gpu-pool: 0 node(s) ready, 0 provisioning" in text and "size 0 to 5" in text
    assert "GPUs pending (waiting for a node): 1" in text

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"release {name}")
    slack.wait_until(
        lambda: [e for e in slack.ephemerals("U_BOB") if "only its owner or an admin" in e["text"]]
    )
    assert len(gpubot_pods(sim)) == 1

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    slack.wait_until(lambda: [e for e in slack.ephemerals("U_ALICE") if e["text"] == f"Released `{name}`."])
    slack.wait_until(lambda: "Released by its owner; deleting the pod." in replies(slack, root), timeout=WAIT)
    advance_until(sim, slack, lambda: not gpubot_pods(sim) and headline_is(slack, "Released")())
    slack.wait_until(
        lambda: "The pod is gone; its GPU is back in the pool." in replies(slack, root), timeout=WAIT
    )
    assert not any(b.get("block_id") == "gpubot_actions" for b in the_root(slack)["blocks"])


def test_release_button_by_the_owner(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    run_and_wait_for_thread(sim, slack)
    root = slack.wait_until(lambda: [r for r in roots(slack) if r["edited"]])[0]
    delivery = slack.click_button("U_ALICE", "C_GPU", root["ts"], actions.RELEASE_ACTION)
    assert delivery.acked
    advance_until(sim, slack, lambda: not gpubot_pods(sim))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("run", "`/gpu run` needs an image to run.\nTry: `/gpu run nvidia/cuda"),
        ("run UPPER/Case", "Try: `/gpu run upper/case"),
        ("frobnicate", "is not a `/gpu` command"),
        ("run nvidia/cuda:12.4.1-base-ubuntu22.04 --gpus 2", "at most 1 GPU"),
    ],
)
def test_bad_input_says_what_to_type_and_creates_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot, text: str, says: str
) -> None:
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
    assert delivery.acked
    shown = delivery.ack_payload["text"] if delivery.ack_payload else ""
    if (
        "--gpus" in text
    ):  # profile limits need the service, so the refusal comes as an ephemeral after the ack
        shown = slack.wait_until(
            lambda: [e["text"] for e in slack.ephemerals("U_ALICE") if "Try:" in e["text"]]
        )[0]
    assert says in shown and "Try: `" in shown
    assert not gpubot_pods(sim) and not roots(slack)


def test_help_explains_each_command(slack: BackgroundSlack, bot: app.Bot) -> None:
    delivery = slack.type_command("U_BOB", "C_GPU", "/gpu", "help")
    assert delivery.ack_payload is not None
    for usage in ("/gpu run IMAGE", "/gpu status [all]", "/gpu release [NAME|all]"):
        assert usage in delivery.ack_payload["text"]


def test_restart_mid_provisioning_resumes_the_thread(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path
) -> None:
    config = bot_settings(sim, slack, tmp_path)
    with running_bot(config, slack):
        root = run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, headline_is(slack, "is provisioning"))
    said_before = replies(slack, root)
    sim.advance(40, step=1)  # the node turns Ready while no bot is watching
    with running_bot(config, slack):
        advance_until(sim, slack, headline_is(slack, "Running on"))
        said = slack.wait_until(
            lambda: (r := replies(slack, root)) and r[-1] == "Running" and r, timeout=WAIT
        )
    assert len(gpubot_pods(sim)) == 1 and len(roots(slack)) == 1
    assert said[: len(said_before)] == said_before
    assert said.count(said_before[0]) == 1, said


def test_the_release_button_id_matches_the_renderer() -> None:
    assert actions.RELEASE_ACTION == slack_render.RELEASE_ACTION


def test_the_scale_channel_gets_one_message_per_episode(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path
) -> None:
    base = bot_settings(sim, slack, tmp_path)
    config = dataclasses.replace(base, slack=dataclasses.replace(base.slack, scale_channel="C_OPS"))
    with running_bot(config, slack):
        run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, step_reached(slack, "Running"))
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
        advance_until(
            sim, slack, lambda: any("back at 0" in m["text"] for m in roots(slack, "C_OPS")), limit=1800
        )
    (episode,) = roots(slack, "C_OPS")
    texts = [r["text"] for r in episode["revisions"]] + [episode["text"]]
    assert any("scaling up" in t for t in texts), texts
    assert "back at 0" in texts[-1]


def test_a_problem_clears_once_the_workload_moves_on(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    """Bob waits at a full pool; once alice releases and bob is scheduled, his thread drops the warning."""
    sim.run(lambda: sim.world.registry.set_autoscaling("gpu-pool", enabled=True, min_size=0, max_size=1))
    run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))
    slack.type_command("U_BOB", "C_GPU", "/gpu", RUN)

    def bobs_root() -> Json | None:
        return next((m for m in roots(slack) if "<@U_BOB>" in json.dumps(m["blocks"])), None)

    def has_problem(message: Json | None) -> bool:
        return message is not None and any(b.get("block_id") == "gpubot_problem" for b in message["blocks"])

    advance_until(sim, slack, lambda: has_problem(bobs_root()))
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    advance_until(
        sim,
        slack,
        lambda: (
            ((root := bobs_root()) is not None and "Scheduled on" in root["text"])
            or "Running" in (root or {}).get("text", "")
        ),
        limit=1800,
    )
    assert not has_problem(bobs_root())
