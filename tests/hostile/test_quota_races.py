"""Quota under races, and a release of a run still being started, over the real bot, sim, emulator and Redis.

Twenty `/gpu run` from one user at once (quota 2 GPUs), on one replica and on two sharing Redis, each race
run GPUBOT_QUOTA_RACES times (20 by default): never more than 2 GPUs held, the rest refused with the quota
message. Three runs typed 0.3 s apart: 2 pods. A run whose thread root Slack keeps refusing is released
while it waits: no pod is ever made, and the releaser, the owner and the thread are told so. A run released
while its create is held: the pod it then makes is deleted, as released.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kubernetes import client

from bot import runtime, settings
from sim.cluster import faults, world
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from tests.faults.rig import QUICK_OUTBOX
from tests.hostile.test_authorization import ADMIN, OWNER, told
from tests.integration.botkit import CUDA, WAIT, Json, bot_settings, gpubot_pods, roots, running_bot

RACES = int(os.environ.get("GPUBOT_QUOTA_RACES", "20"))
"""How many times each 20-way race is run."""
AT_ONCE = 20
QUOTA_SAID = "Your GPU quota is 2; you already hold "
NEVER = 3600.0
RESERVATIONS = "gpubot:reservations"
"""The Redis hash of runs between their quota check and their pod (the settings' default key prefix)."""


def bot_config(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str, identity: str
) -> settings.Settings:
    config = bot_settings(sim, slack, tmp_path, redis_url)
    return dataclasses.replace(
        config,
        reaper=settings.ReaperSettings(interval_seconds=NEVER),
        leader=dataclasses.replace(config.leader, identity=identity),
    )


@contextlib.contextmanager
def replicas(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str, count: int
) -> Iterator[list[runtime.Bot]]:
    """`count` real bots on one Redis, each with its own Socket Mode connection (envelopes go round robin),
    Slack's pacing lifted as the emulator's limits are off (18 refusals a race would otherwise queue)."""
    with contextlib.ExitStack() as stack:
        clock = sim.world.clock.datetime
        yield [
            stack.enter_context(
                running_bot(
                    bot_config(sim, slack, tmp_path, redis_url, f"gpubot-{n}"),
                    slack,
                    clock=clock,
                    outbox_settings=QUICK_OUTBOX,
                )
            )
            for n in range(count)
        ]


def held_gpus(sim: world.BackgroundWorld) -> int:
    """GPUs the owner's live pods hold (or wait for), as the cluster has them."""
    return sum(
        int(c["resources"]["limits"].get("nvidia.com/gpu", 0))
        for p in gpubot_pods(sim)
        if not p["metadata"].get("deletionTimestamp")
        for c in p["spec"]["containers"]
    )


def refusals(slack: BackgroundSlack) -> int:
    return sum(QUOTA_SAID in text for text in told(slack, OWNER))


def reservations_left(redis_url: str) -> int:
    with redis.Redis.from_url(redis_url) as raw:
        return int(raw.hlen(RESERVATIONS))


def type_at_once(slack: BackgroundSlack, texts: list[str]) -> None:
    """Each text typed by the owner on its own thread, all released together."""
    start = threading.Barrier(len(texts))

    def type_one(text: str) -> None:
        start.wait()
        slack.type_command(OWNER, "C_GPU", "/gpu", text)

    threads = [threading.Thread(target=type_one, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def settle(
    slack: BackgroundSlack, sim: world.BackgroundWorld, redis_url: str, *, runs: int, refused_before: int
) -> None:
    """Every run answered (a pod or the quota's refusal) and every reservation given back."""
    deadline = time.monotonic() + 3 * WAIT
    while len(gpubot_pods(sim)) + refusals(slack) - refused_before < runs or reservations_left(redis_url):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{len(gpubot_pods(sim))} pods, {refusals(slack) - refused_before} refusals, "
                f"{reservations_left(redis_url)} reservations left after {3 * WAIT} s"
            )
        time.sleep(0.02)


def clear_pods(core: client.CoreV1Api, sim: world.BackgroundWorld) -> None:
    for pod in gpubot_pods(sim):
        core.delete_namespaced_pod(pod["metadata"]["name"], "default", grace_period_seconds=0)


@pytest.mark.parametrize("replica_count", [1, 2])
def test_twenty_runs_at_once_never_pass_the_quota(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    core: client.CoreV1Api,
    tmp_path: Path,
    redis_url: str,
    replica_count: int,
) -> None:
    held: list[int] = []
    refused: list[int] = []
    with replicas(sim, slack, tmp_path, redis_url, replica_count):
        for _ in range(RACES):
            refused_before = refusals(slack)
            type_at_once(slack, [f"run {CUDA} -- sleep 3600"] * AT_ONCE)
            settle(slack, sim, redis_url, runs=AT_ONCE, refused_before=refused_before)
            held.append(held_gpus(sim))
            refused.append(refusals(slack) - refused_before)
            clear_pods(core, sim)
    print(f"{replica_count} replica(s), {RACES} races of {AT_ONCE}: GPUs held {held}, refused {refused}")
    assert held == [2] * RACES  # 0 over quota, and the quota's room used every time
    assert refused == [AT_ONCE - 2] * RACES  # every other run told the quota


def test_three_runs_typed_a_third_of_a_second_apart_make_two_pods(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with replicas(sim, slack, tmp_path, redis_url, 1):
        for n in range(3):
            if n:
                time.sleep(0.3)  # the pace a user types at; what passes does not depend on it
            slack.type_command(OWNER, "C_GPU", "/gpu", f"run {CUDA} --name t{n} -- sleep 3600")
        settle(slack, sim, redis_url, runs=3, refused_before=0)
    assert held_gpus(sim) == 2 and refusals(slack) == 1


def pod_creates(sim: world.BackgroundWorld) -> int:
    """Pod creates the API server took, from any client: the sim counts every request."""
    snapshot = sim.run(sim.world.api.traffic.snapshot)
    return sum(r["count"] for r in snapshot["requests"] if (r["verb"], r["resource"]) == ("create", "pods"))


def root_of(slack: BackgroundSlack) -> Json | None:
    found = roots(slack)
    return found[0] if found else None


@pytest.mark.parametrize(
    ("releaser", "text", "answer"),
    [
        (OWNER, "release train", "Released `train` while it was still being started: no pod will run."),
        (OWNER, "release", "Released `train` while it was still being started: no pod will run."),
        (OWNER, "release all", "Released `train` while it was still being started: no pod will run."),
        (ADMIN, "release train", "Released `train` while it was still being started: no pod will run."),
    ],
)
def test_a_release_of_a_run_still_being_started_leaves_no_pod(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    tmp_path: Path,
    redis_url: str,
    releaser: str,
    text: str,
    answer: str,
) -> None:
    """Slack refuses the thread root (503) until the release is in: the run waits inside its root's post."""
    slack.set_faults(FaultConfig(rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage"})))
    with replicas(sim, slack, tmp_path, redis_url, 1) as (bot,):
        slack.type_command(OWNER, "C_GPU", "/gpu", f"run {CUDA} --name train -- sleep 3600")
        slack.wait_until(lambda: slack.calls("chat.postMessage"), timeout=WAIT)  # the root's first try
        before = len(told(slack, releaser))
        slack.type_command(releaser, "C_GPU", "/gpu", text)
        said = slack.wait_until(lambda: told(slack, releaser)[before:], timeout=WAIT)
        slack.set_faults(FaultConfig())
        root = slack.wait_until(
            lambda: (r := root_of(slack)) and "before its pod was made" in r["text"] and r, timeout=2 * WAIT
        )
        deadline = time.monotonic() + WAIT
        while reservations_left(redis_url) and time.monotonic() < deadline:
            time.sleep(0.02)
        bot.outbox.flush(WAIT)
        assert reservations_left(redis_url) == 0  # the run is over: nothing can make its pod any more
    assert said == [answer]
    who = "its owner" if releaser == OWNER else f"admin {ADMIN}"
    assert root["text"] == f":no_entry_sign: Released by {who} before its pod was made; nothing was started."
    assert gpubot_pods(sim) == [] and pod_creates(sim) == 0  # none left, and none ever made
    if releaser != OWNER:
        assert any("before its pod was made" in t for t in told(slack, OWNER))


def test_a_release_while_the_pod_is_being_created_deletes_the_pod_the_run_then_makes(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    """The create is held (3 wall seconds, then 504, not carried out) while the release comes in: the
    release finds no pod and marks the run; the run's retried create makes the pod, reads the mark after it,
    and deletes that pod as released by its owner."""
    held = faults.ApiFaultConfig(
        timeout_rate=1.0,
        verbs=frozenset({"create"}),
        resources=frozenset({"pods"}),
        committed_timeouts=0.0,
        hold_seconds=3.0,
    )
    with replicas(sim, slack, tmp_path, redis_url, 1) as (bot,):
        sim.run(lambda: sim.world.api.faults.set(held))
        slack.type_command(OWNER, "C_GPU", "/gpu", f"run {CUDA} --name train -- sleep 3600")
        deadline = time.monotonic() + WAIT
        while pod_creates(sim) < 1:  # the first create is in, and held
            assert time.monotonic() < deadline, "the run never tried its create"
            time.sleep(0.01)
        before = len(told(slack, OWNER))
        slack.type_command(OWNER, "C_GPU", "/gpu", "release train")
        said = slack.wait_until(lambda: told(slack, OWNER)[before:], timeout=WAIT)
        sim.run(lambda: sim.world.api.faults.set(faults.ApiFaultConfig()))
        deadline = time.monotonic() + 3 * WAIT
        while pod_creates(sim) < 2 or gpubot_pods(sim) or reservations_left(redis_url):
            assert time.monotonic() < deadline, (
                f"{pod_creates(sim)} creates, {len(gpubot_pods(sim))} pods left"
            )
            time.sleep(0.02)
        root = slack.wait_until(lambda: (r := root_of(slack)) and "Released" in r["text"] and r, timeout=WAIT)
        bot.outbox.flush(WAIT)
    assert said == ["Released `train` while it was still being started: no pod will run."]
    assert gpubot_pods(sim) == [] and pod_creates(sim) == 2  # the held try, then the one the run deleted
    assert "Released by its owner" in root["text"]  # the thread tells it as the release it was
