"""The line for GPUs at a full pool, with the real bot on the sim: each waiting owner sees their place and
an ETA from the holders' leases, and both move as the holders extend and release."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from bot import app
from bot.core import labels, podspec
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    RUN,
    WAIT,
    Json,
    advance_until,
    gpubot_pods,
    replies,
    roots,
    step_reached,
    wait_for_pods,
)

pytestmark = pytest.mark.usefixtures("slack_env")
POOL = "gpu-pool"


def root_of(sim: world.BackgroundWorld, slack: BackgroundSlack, user: str) -> Json:
    """The user's newest thread root, found through their pod's annotation (the root names them only
    after its first news)."""
    mine = [p for p in gpubot_pods(sim) if p["metadata"]["labels"][labels.OWNER_LABEL] == user]
    ts = mine[-1]["metadata"]["annotations"][labels.THREAD_TS_ANNOTATION]
    (root,) = [r for r in roots(slack) if r["ts"] == ts]
    return root


def hours(text: str) -> float:
    """The ETA's upper end in a "#N in line, about … to 4h05m" headline, in hours."""
    headline = text.split(" — ")[0]  # the fallback text goes on with the problem's summary
    found = re.search(r"(\d+)h(\d\d)m$", headline) or re.search(r"(\d+) min$", headline)
    assert found, text
    return int(found[1]) + int(found[2]) / 60 if len(found.groups()) == 2 else int(found[1]) / 60


def test_a_full_pool_shows_each_waiter_its_place_and_an_eta_that_moves_with_the_holders(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    sim.run(lambda: sim.world.registry.set_autoscaling(POOL, enabled=True, min_size=0, max_size=1))
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    wait_for_pods(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running on"))

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"run {CUDA} --hours 1 -- sleep 86400")
    wait_for_pods(sim, slack, 2)
    bob = lambda: root_of(sim, slack, "U_BOB")["text"]  # noqa: E731
    advance_until(sim, slack, lambda: "Waiting for a GPU: #1 in line, about " in bob())
    first = hours(bob())
    assert 3.9 <= first <= 4.2, bob()  # alice's 4-hour lease and the 5-minute grace, less the minutes since

    slack.type_command("U_ADMIN", "C_GPU", "/gpu", f"run {CUDA} --hours 2 -- sleep 86400")
    wait_for_pods(sim, slack, 3)
    ada = lambda: root_of(sim, slack, "U_ADMIN")["text"]  # noqa: E731
    advance_until(sim, slack, lambda: "#2 in line" in ada())
    assert "Waiting for a GPU: #2 in line, behind GPUs with no lease end gpubot knows" in ada()

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "extend 2")
    slack.wait_until(lambda: hours(bob()) >= first + 1.9, timeout=WAIT)  # her 2 more hours move bob's ETA

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    advance_until(sim, slack, lambda: "Running on" in bob())
    advance_until(sim, slack, lambda: "Waiting for a GPU: #1 in line, about " in ada())
    assert 0.9 <= hours(ada()) <= 1.2, ada()  # now behind bob's one-hour lease
    running = lambda: [r for r in replies(slack, root_of(sim, slack, "U_BOB")) if "Running on" in r]  # noqa: E731
    (told,) = slack.wait_until(running, timeout=WAIT)
    assert told.startswith("<@U_BOB> Running on "), told  # the owner hears when the line reaches them


def buttons(message: Json) -> list[str]:
    return [e["action_id"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_asking_for_a_gpu_dms_the_owner_of_an_idle_one_who_can_release_it_from_there(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    sim.run(lambda: sim.world.registry.set_autoscaling(POOL, enabled=True, min_size=0, max_size=1))
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    wait_for_pods(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running on"))
    (alices,) = gpubot_pods(sim)
    warned = sim.world.clock.datetime() - timedelta(minutes=10)  # as the reaper marks an idle GPU
    bot.cluster.annotate_pod(
        "default", alices["metadata"]["name"], {labels.IDLE_WARNED_AT_ANNOTATION: podspec.format_time(warned)}
    )

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"run {CUDA} --hours 1 -- sleep 86400")
    wait_for_pods(sim, slack, 2)
    advance_until(sim, slack, lambda: "gpubot_ask" in buttons(root_of(sim, slack, "U_BOB")))
    bobs = root_of(sim, slack, "U_BOB")

    assert slack.click_button("U_ALICE", "C_GPU", bobs["ts"], "gpubot_ask").acked  # not hers to ask for
    slack.wait_until(lambda: told(slack, "U_ALICE", "only its owner or an admin may ask"), timeout=WAIT)
    assert slack.click_button("U_BOB", "C_GPU", bobs["ts"], "gpubot_ask").acked
    slack.wait_until(lambda: told(slack, "U_BOB", "Asked the owner of idle t4 GPUs"), timeout=WAIT)
    (dm,) = slack.wait_until(
        lambda: [m for m in slack.messages("D_ALICE") if "is waiting" in m["text"]], timeout=WAIT
    )
    assert dm["text"].startswith(":wave: bob is waiting for a t4 GPU, and your `gpu-u-alice-"), dm["text"]
    assert buttons(dm) == ["gpubot_keep_asked", "gpubot_release"]
    assert "[Keep 30 min]" in slack.render_text()

    pressed = datetime.now(UTC)  # the bot's clock here is the wall clock
    assert slack.click_button("U_ALICE", "D_ALICE", dm["ts"], "gpubot_keep_asked").acked  # a little longer
    kept = lambda: bot.cluster.get_workload("default", alices["metadata"]["name"]).marks.kept_until  # noqa: E731
    until = slack.wait_until(kept, timeout=WAIT)
    assert (
        timedelta(minutes=30) - timedelta(seconds=1) <= until - pressed <= timedelta(minutes=30, seconds=WAIT)
    )
    assert slack.click_button("U_ALICE", "D_ALICE", dm["ts"], "gpubot_release").acked  # she gives it up
    advance_until(sim, slack, lambda: "Running on" in root_of(sim, slack, "U_BOB")["text"])
    assert alices["metadata"]["name"] not in [p["metadata"]["name"] for p in gpubot_pods(sim)]


def told(slack: BackgroundSlack, user: str, words: str) -> bool:
    return any(words in e["text"] for e in slack.ephemerals(user))


def test_when_the_clouds_gpu_quota_is_used_up_the_waiters_are_in_line_through_the_back_off(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    """The pool may grow (max 5) but the project's GPU quota may not: GKE says `GCE quota exceeded`, the
    autoscaler backs off, and bob's thread keeps the cause and his place until alice's GPU comes back."""
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    wait_for_pods(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running on"))
    sim.run(lambda: sim.world.set_fault(POOL, "quota"))

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"run {CUDA} --hours 1 -- sleep 86400")
    wait_for_pods(sim, slack, 2)
    bob = lambda: root_of(sim, slack, "U_BOB")  # noqa: E731
    advance_until(sim, slack, lambda: "Waiting for a GPU: #1 in line, about " in bob()["text"])
    assert "GPU quota is used up" in str(bob()["blocks"]), bob()
    events = sim.run(lambda: [e["message"] for e in sim.world.store.items("events", "default")])
    assert any("failed: GCE quota exceeded. Pod is at risk of not being scheduled." in m for m in events)
    advance_until(
        sim,
        slack,
        lambda: any(
            "in backoff after failed scale-up" in m
            for m in sim.run(lambda: [e["message"] for e in sim.world.store.items("events", "default")])
        ),
        limit=1800,
        stride=30,
    )
    assert "#1 in line" in bob()["text"] and "GPU quota is used up" in str(bob()["blocks"]), bob()

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    advance_until(sim, slack, lambda: "Running on" in bob()["text"])
