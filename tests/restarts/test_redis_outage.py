"""Redis flushed, or down for a minute, under a running bot: no workload lost or leaked, and whatever Redis
held is either rebuilt from the pods or said plainly to be missing."""

from __future__ import annotations

import os
import time

import pytest

from sim.cluster import world
from sim.slack.deliveries import Delivery
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import DEFAULT_USERS
from tests.integration.botkit import CUDA, RUN, advance_until, step_reached
from tests.restarts import ledger, processes
from tests.restarts.conftest import BotFactory

# Everything the test does happens inside the outage; what is left of it is only waited out, on the wall clock
# (no timer of the bot's counts Redis' absence, and its socket timeouts are 2 s). `make test` waits 15 s;
# GPUBOT_REDIS_OUTAGE_SECONDS=60 gives the full minute of docs/reliability.md.
OUTAGE_SECONDS = float(os.environ.get("GPUBOT_REDIS_OUTAGE_SECONDS", "15"))
"""Real seconds Redis stays down while users keep working."""
SCALE = {"GPUBOT_SCALE_CHANNEL": "C_OPS", "GPUBOT_REAPER_INTERVAL_SECONDS": "1"}
BOB_RUN = f"run {CUDA} -- python train.py"

pytestmark = pytest.mark.usefixtures("slack_env")


def thread_of(slack: BackgroundSlack, user: str) -> ledger.Json:
    name = next(u.name for u in DEFAULT_USERS if u.id == user)
    (root,) = [
        r
        for r in ledger.roots(slack)
        if f"<@{user}>" in str(r["blocks"]) or r["text"].startswith(f"{name} asked for")  # before its news
    ]
    return root


def ephemeral(slack: BackgroundSlack, user: str, words: str) -> list[ledger.Json]:
    return [e for e in slack.ephemerals(user) if words in e["text"]]


def release_all(sim: world.BackgroundWorld, slack: BackgroundSlack, pods: ledger.PodLedger) -> None:
    for user in ("U_ALICE", "U_BOB"):
        slack.type_command(user, "C_GPU", "/gpu", "release all")
    processes.wait(lambda: all(p["metadata"].get("deletionTimestamp") for p in sim.pods()), what="releases")
    advance_until(sim, slack, lambda: not pods.live and not ledger.open_threads(slack))


def pool_back_at_zero(sim: world.BackgroundWorld, slack: BackgroundSlack) -> None:
    gpu_nodes = lambda: [n for n in sim.nodes() if "gpu-pool" in n["metadata"]["name"]]  # noqa: E731
    advance_until(sim, slack, lambda: not gpu_nodes(), stride=60, limit=3600)
    processes.wait(
        lambda: any("back at 0" in m["text"] for m in ledger.roots(slack, "C_OPS")), what="the episode closed"
    )


def two_workloads(sim: world.BackgroundWorld, slack: BackgroundSlack, pods: ledger.PodLedger) -> Delivery:
    """Alice's Running, Bob's waiting for a node; returns Alice's delivery, to redeliver."""
    alice = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))
    slack.type_command("U_BOB", "C_GPU", "/gpu", BOB_RUN)
    processes.wait(lambda: len(pods.created) == 2, what="bob's pod")
    return alice


def assert_nothing_lost(pods: ledger.PodLedger, slack: BackgroundSlack) -> None:
    assert len(pods.created) == 2 and not pods.threads_with_two_pods() and not pods.live
    assert len(ledger.roots(slack)) == 2 and not ledger.open_threads(slack)


def test_flushall_mid_lifecycle_loses_nothing_and_a_redelivery_still_acts_once(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bots: BotFactory,
    own_redis: processes.RedisServer,
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots(**SCALE)
    bot.start()
    alice = two_workloads(sim, slack, pods)
    assert own_redis.keys()

    own_redis.flush()
    assert slack.redeliver(alice).acked  # its claim went with the flush; the pod itself says it is done
    advance_until(sim, slack, lambda: "Running on" in thread_of(slack, "U_BOB")["text"])
    release_all(sim, slack, pods)
    pool_back_at_zero(sim, slack)
    assert_nothing_lost(pods, slack)
    episodes = ledger.roots(slack, "C_OPS")
    assert len(episodes) == 1, [m["text"] for m in episodes]  # still edited from the bot's memory


def test_flushall_then_a_restart_rebuilds_every_thread_from_the_pods(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bots: BotFactory,
    own_redis: processes.RedisServer,
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots(**SCALE)
    bot.start()
    two_workloads(sim, slack, pods)
    own_redis.flush()
    bot.kill()
    bot.start()
    advance_until(sim, slack, lambda: "Running on" in thread_of(slack, "U_BOB")["text"])
    release_all(sim, slack, pods)
    pool_back_at_zero(sim, slack)
    assert_nothing_lost(pods, slack)
    # The episode's message ts went with the flush: the restarted bot opens a message of its own that says
    # it resumed after a restart, and closes it; the first stays as last edited (docs/reliability.md).
    latest = ledger.roots(slack, "C_OPS")[-1]
    assert "back at 0" in latest["text"]


def test_redis_down_for_a_minute_commands_work_or_say_what_is_missing(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bots: BotFactory,
    own_redis: processes.RedisServer,
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots(**SCALE)
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))

    own_redis.stop()
    down_since = time.monotonic()
    refused_run(slack, pods)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    report = processes.wait(lambda: ephemeral(slack, "U_ALICE", "Your workloads"), what="the status")
    assert "$0" not in report[0]["text"].split("GPU pools")[0]
    assert "unknown" in report[0]["text"] and "Redis" in report[0]["text"], report[0]["text"]
    assert slack.click_button("U_ALICE", "C_GPU", thread_of(slack, "U_ALICE")["ts"], "gpubot_extend").acked
    processes.wait(lambda: ledger.replies(slack, thread_of(slack, "U_ALICE"), "Extended by"), what="extended")
    bot.kill()  # a bot that starts while Redis is down still resumes every thread
    bot.start()
    processes.wait(lambda: time.monotonic() - down_since >= OUTAGE_SECONDS, timeout=2 * OUTAGE_SECONDS)
    own_redis.start()

    again = slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    assert again.acked
    slack.type_command("U_BOB", "C_GPU", "/gpu", BOB_RUN)  # a minute later, as the refusal said
    processes.wait(lambda: len(pods.created) == 2 and len(ledger.roots(slack)) == 2, what="bob's thread")
    release_all(sim, slack, pods)
    pool_back_at_zero(sim, slack)
    assert_nothing_lost(pods, slack)


def refused_run(slack: BackgroundSlack, pods: ledger.PodLedger) -> None:
    """Bob's run while Redis is down: refused before anything is made, as it could not be journaled."""
    bob = slack.type_command("U_BOB", "C_GPU", "/gpu", BOB_RUN)
    assert bob.acked
    processes.wait(lambda: ephemeral(slack, "U_BOB", "cannot keep track of new runs"), what="the refusal")
    assert len(pods.created) == 1 and len(ledger.roots(slack)) == 1


def test_killed_with_redis_down_after_a_run_was_typed_no_run_is_lost(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bots: BotFactory,
    own_redis: processes.RedisServer,
) -> None:
    """The run journal is in Redis: a run typed while it is down would have nothing to carry it across a
    kill before its pod exists (Slack refusing posts holds such a run in its root's post, where the kill
    lands). It is refused instead, so each run typed is a pod and a thread, or told it was not started."""
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))
    own_redis.stop()
    slack.set_faults(FaultConfig(rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage"})))
    refused_run(slack, pods)
    bot.kill()
    slack.set_faults(FaultConfig())
    own_redis.start()
    bot.start()

    advance_until(sim, slack, lambda: "Running on" in thread_of(slack, "U_ALICE")["text"])
    told = ephemeral(slack, "U_BOB", "cannot keep track of new runs")
    assert len(told) == 1 and "Try again in a minute" in told[0]["text"]
    assert len(pods.created) == 1 and len(ledger.roots(slack)) == 1, "bob's run: refused, so nothing to lose"
