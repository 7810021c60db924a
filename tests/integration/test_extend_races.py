"""`/gpu extend` racing the reaper's expiry, over the real bot, sim, emulator and Redis: the owner's answer
and the pod's fate agree every time (before the fix, 8 of 8 told "Extended" of a pod the reaper deleted).

Each race: a one-hour lease past its end and grace, the owner's extend typed while a reaper round runs,
the round started after a different pause each time so the two interleave differently. Whatever the
order, "Extended" means the pod lives on with the longer lease and its thread says so, never "Deleted";
any other answer means the pod is going and its thread says "Deleted", never "Extended".
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client

from bot.core import labels, podspec
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.hostile.test_authorization import OWNER, pod_named, told
from tests.integration.botkit import CUDA, WAIT, Json, advance_until, roots
from tests.integration.test_reaper import reaping_bot, said

pytestmark = pytest.mark.usefixtures("slack_env")
RACES = int(os.environ.get("GPUBOT_EXTEND_RACES", "8"))
PAUSES = [0.0, 0.01, 0.02, 0.04, -0.005, -0.01, -0.02, -0.04]
"""Seconds between typing the extend and starting the reaper round (negative: the round starts first),
only to vary how the two interleave; what passes does not depend on it."""
ANSWERS = ("Extended `", "Too late to extend", "is being released", "is gone already", "no running workloads")


def race(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: object, name: str, pause: float
) -> tuple[str, dict[str, object] | None]:
    """Type the extend while a reaper round runs; the owner's answer, and the pod once both are done."""
    before = len(told(slack, OWNER))
    reaping = threading.Thread(target=lambda: (time.sleep(max(pause, 0)), bot.reap()))  # type: ignore[attr-defined]
    reaping.start()
    time.sleep(max(-pause, 0))
    slack.type_command(OWNER, "C_GPU", "/gpu", f"extend {name} 1")
    answers = slack.wait_until(
        lambda: [
            t for t in told(slack, OWNER)[before:] if t.startswith(ANSWERS) or any(a in t for a in ANSWERS)
        ],
        timeout=WAIT,
    )
    reaping.join(WAIT)
    bot.cluster.wait_synced(WAIT)  # type: ignore[attr-defined]
    bot.reap()  # type: ignore[attr-defined]  # a delete on record but not yet done is finished here
    bot.outbox.flush(WAIT)  # type: ignore[attr-defined]
    (answer,) = answers
    return answer, pod_named(sim, name)


def notes(sim: world.BackgroundWorld, name: str) -> dict[str, str]:
    pod = pod_named(sim, name)
    assert pod is not None
    found: dict[str, str] = pod["metadata"]["annotations"]
    return found


def started(sim: world.BackgroundWorld, slack: BackgroundSlack, name: str) -> Json:
    """The workload's thread root once its pod runs."""
    deadline = time.monotonic() + WAIT
    while pod_named(sim, name) is None:  # no Slack call marks the create: the sim is checked
        assert time.monotonic() < deadline, f"no pod {name}; the owner was told {told(slack, OWNER)}"
        time.sleep(0.01)
    ts = notes(sim, name)[labels.THREAD_TS_ANNOTATION]
    running = lambda: (pod := pod_named(sim, name)) and pod["status"].get("phase") == "Running"  # noqa: E731
    advance_until(sim, slack, running)
    return next(r for r in roots(slack) if r["ts"] == ts)


def verdict(
    sim: world.BackgroundWorld, slack: BackgroundSlack, root: Json, answer: str, pod: Json | None
) -> str:
    """ "extended" or "deleted" when the answer, the pod and the thread agree; what disagrees otherwise."""
    alive = pod is not None and not pod["metadata"].get("deletionTimestamp")
    if answer.startswith("Extended `"):
        end = podspec.parse_time(pod["metadata"]["annotations"][labels.LEASE_END_ANNOTATION]) if pod else None
        if not (alive and end is not None and end > sim.world.clock.datetime()):
            return f"told {answer!r}, but the pod is going"
        if said(slack, root, "Deleted") or not said(slack, root, "Extended by its owner"):
            return f"told {answer!r}, but the thread says {[m['text'] for m in said(slack, root, '')]}"
        return "extended"
    if alive:
        return f"told {answer!r}, but the pod lives on"
    with contextlib.suppress(TimeoutError):
        slack.wait_until(lambda: said(slack, root, "Deleted"), timeout=WAIT)
    if not said(slack, root, "Deleted") or said(slack, root, "Extended by"):
        return f"told {answer!r}, but the thread says {[m['text'] for m in said(slack, root, '')]}"
    return "deleted"


def test_extend_racing_the_expiry_is_answered_as_the_pod_ends(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    core: client.CoreV1Api,
    tmp_path: Path,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bot.services.reaper")
    outcomes: list[str] = []
    with reaping_bot(sim, slack, tmp_path, redis_url) as bot:
        for n in range(RACES):
            name = f"race-{n}"
            slack.type_command(
                OWNER, "C_GPU", "/gpu", f"run {CUDA} --name {name} --hours 1 -- python train.py"
            )
            root = started(sim, slack, name)
            was = podspec.parse_time(notes(sim, name)[labels.LEASE_END_ANNOTATION])
            assert was is not None
            sim.advance((was - sim.world.clock.datetime()).total_seconds() + 6 * 60, step=60)
            bot.cluster.wait_synced(WAIT)
            answer, pod = race(sim, slack, bot, name, PAUSES[n % len(PAUSES)])
            outcomes.append(verdict(sim, slack, root, answer, pod))
            if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                core.delete_namespaced_pod(name, "default", grace_period_seconds=0)  # room for the next race
    extended, deleted = outcomes.count("extended"), outcomes.count("deleted")
    claim_lost = caplog.text.count("changed before its expire")
    record_lost = caplog.text.count("changed since its reap was claimed")
    print(
        f"{RACES} races: {extended} extended, {deleted} deleted; the reaper lost its claim {claim_lost} "
        f"times, its record after claiming {record_lost} times; {outcomes}"
    )
    assert extended + deleted == RACES, outcomes  # the answer matched the pod's fate every time
