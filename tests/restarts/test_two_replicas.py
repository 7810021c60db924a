"""Two `gpubot serve` replicas with leader election over one sim, emulator and Redis; the leader is
SIGKILLed mid-stream, with a reminder claimed and not yet delivered, and the follower takes over.

Counted in the emulator's transcript: every reminder, nudge, expiry and clean-up exactly once per workload
(and each reminder's DM once), and one channel message for the one scale episode, edited to its end.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from bot.core import labels, podspec
from sim.cluster import world
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, advance_until
from tests.restarts import ledger, processes
from tests.restarts.conftest import BotFactory
from tests.restarts.test_bot_killed import advance_to, failed_posts, terminating

pytestmark = pytest.mark.usefixtures("slack_env")

REPLICA = {
    "GPUBOT_SCALE_CHANNEL": "C_OPS",
    "GPUBOT_REAPER_INTERVAL_SECONDS": "1",
    "GPUBOT_MAX_GPUS_PER_USER": "4",
    "GPUBOT_FINISHED_RETENTION_MINUTES": "2",
    # The Lease runs on the wall clock: a 6 s lease has the 30 s default's proportions (deadline 2/3 of it,
    # a retry well inside) and lets the follower take over without the test waiting half a minute.
    "GPUBOT_LEADER_LEASE_SECONDS": "6",
    "GPUBOT_LEADER_RENEW_DEADLINE_SECONDS": "4",
    "GPUBOT_LEADER_RETRY_SECONDS": "1",
}
EXPIRING = f"run {CUDA} --hours 1 -- python train.py"
RELEASED = f"run {CUDA} -- python train.py"
FAILING = f"run {CUDA} -- false"
SLACK_DOWN_ALL = FaultConfig(
    rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage", "chat.update"})
)
STREAM = [
    ("U_ALICE", EXPIRING),
    ("U_BOB", EXPIRING),
    ("U_ADMIN", EXPIRING),
    ("U_ALICE", RELEASED),
    ("U_BOB", RELEASED),
    ("U_ADMIN", FAILING),
]


def thread_of(slack: BackgroundSlack, name: str) -> ledger.Json:
    (root,) = [r for r in ledger.roots(slack) if r["text"].startswith(f"default/{name}:")]
    return root


def said(slack: BackgroundSlack, name: str, words: str) -> int:
    return len(ledger.replies(slack, thread_of(slack, name), words))


def claims(sim: world.BackgroundWorld) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in sim.pods()
        if p["metadata"].get("annotations", {}).get(labels.TELLING_SINCE_ANNOTATION)
    ]


def pods_of(sim: world.BackgroundWorld, text: str) -> list[ledger.Json]:
    """gpubot's pods asked for with `/gpu text`, by name."""
    found = [
        p for p in sim.pods() if p["metadata"]["annotations"][labels.COMMAND_ANNOTATION] == f"/gpu {text}"
    ]
    return sorted(found, key=lambda p: str(p["metadata"]["name"]))


def name(pod: ledger.Json) -> str:
    return str(pod["metadata"]["name"])


def test_the_leader_killed_mid_stream_every_act_and_notice_happens_once(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    sim.run(lambda: sim.world.registry.set_autoscaling("gpu-pool", enabled=True, min_size=0, max_size=8))
    pods = ledger.pod_ledger(sim)
    first, second = bots("gpubot-a", **REPLICA), bots("gpubot-b", **REPLICA)
    first.start(wait_for=processes.LEADING)
    second.start()
    for user, text in STREAM:
        assert slack.type_command(user, "C_GPU", "/gpu", text).acked
    # Every pod made before the clock moves, so the three one-hour leases end at one instant.
    processes.wait(lambda: len(pods.created) == len(STREAM), what="every pod created")
    running = lambda: [p for p in sim.pods() if p["status"].get("phase") == "Running"]  # noqa: E731
    advance_until(sim, slack, lambda: len(running()) == 5 and len(ledger.roots(slack)) == len(STREAM))
    expiring = [name(p) for p in pods_of(sim, EXPIRING)]
    released = [(owner(p), name(p)) for p in pods_of(sim, RELEASED)]
    (failed,) = [name(p) for p in pods_of(sim, FAILING)]
    (end,) = {lease_end(p) for p in pods_of(sim, EXPIRING)}
    advance_to(sim, sim.world.clock.datetime() + timedelta(minutes=3))  # the failed pod's retention is over
    processes.wait(lambda: said(slack, failed, "Cleaned up"), what="the failed pod cleaned up")

    # Slack stops taking posts and edits: the leader claims a reminder it cannot deliver, and releases two
    # pods whose last edits never leave its outbox; then it is killed.
    slack.set_faults(SLACK_DOWN_ALL)
    before = failed_posts(slack)
    advance_to(sim, end - timedelta(minutes=14))
    processes.wait(lambda: claims(sim) and failed_posts(slack) > before, what="a reminder claimed")
    for user, workload in released:
        slack.type_command(user, "C_GPU", "/gpu", f"release {workload}")
    going = lambda: [p for p in sim.pods() if p["metadata"].get("deletionTimestamp")]  # noqa: E731
    processes.wait(lambda: len(going()) == len(released), what="the releases")
    sim.advance(60)
    processes.wait(lambda: len(pods.deleted) == 1 + len(released), what="the released pods gone")
    first.kill()
    slack.set_faults(FaultConfig())
    second.wait_for_log(processes.LEADING)

    processes.wait(lambda: all(ledger.is_closed(thread_of(slack, n)) for _, n in released), what="redrawn")
    advance_to(sim, end - timedelta(minutes=8))  # the dead leader's claim is void by now
    processes.wait(lambda: all(said(slack, n, "lease on") for n in expiring), what="every reminder")
    advance_to(sim, end - timedelta(minutes=2))
    processes.wait(lambda: all(said(slack, n, "left on") for n in expiring), what="every nudge")
    advance_to(sim, end + timedelta(minutes=6))
    processes.wait(lambda: all(said(slack, n, "Deleted") for n in expiring), what="every expiry")
    processes.wait(lambda: terminating(sim), what="every delete")
    advance_until(sim, slack, lambda: not pods.live and not ledger.open_threads(slack))
    gpu_nodes = lambda: [n for n in sim.nodes() if "gpu-pool" in n["metadata"]["name"]]  # noqa: E731
    advance_until(sim, slack, lambda: not gpu_nodes(), stride=60, limit=3600)
    processes.wait(
        lambda: any("back at 0" in m["text"] for m in ledger.roots(slack, "C_OPS")), what="the episode closed"
    )

    for workload in expiring:
        assert [said(slack, workload, w) for w in ("lease on", "left on", "Deleted")] == [1, 1, 1], workload
    for user in ("U_ALICE", "U_BOB", "U_ADMIN"):
        assert len(ledger.dms(slack, user, "lease on")) == len(ledger.dms(slack, user, "left on")) == 1, user
    assert said(slack, failed, "Cleaned up") == 1
    assert len(pods.created) == len(STREAM) and not pods.threads_with_two_pods()
    assert len(ledger.roots(slack)) == len(STREAM) and not ledger.open_threads(slack)
    (episode,) = ledger.roots(slack, "C_OPS")
    assert "back at 0" in episode["text"]


def owner(pod: ledger.Json) -> str:
    return str(pod["metadata"]["annotations"][labels.REQUESTER_ANNOTATION])


def lease_end(pod: ledger.Json) -> datetime:
    end = podspec.parse_time(pod["metadata"]["annotations"][labels.LEASE_END_ANNOTATION])
    assert end is not None
    return end
