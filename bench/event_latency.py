"""P2: from a pod turning Running in the cluster to the thread root saying so, against a 5 s poller.

The sim runs on the wall clock (speed 1) with a warm GPU pool, so a pod is Running about two seconds after
it is created. Workloads arrive one every few seconds, each one twice: once as gpubot's own pod (posted
root, `podspec.build_pod`), followed by `gpubot serve` through its informers and outbox; once as the same
pod without gpubot's label, followed by `pollers.PhaseNotifier`, which lists pods every 5 s and edits the
root when a phase changed. The sim stamps the commit that makes a pod Running; the Slack emulator stamps
each `chat.update` it receives; the latency is the first edit of that pod's root saying "Running" after
the commit. Both clocks are this process's `time.time()`.

    .venv/bin/python -m bench.event_latency [--quick]
"""

from __future__ import annotations

import threading
import time

from slack_sdk import WebClient

from bench import figures, pollers, rig, workloads
from bench.figures import Figure, Goal, Report
from sim.cluster import world
from sim.cluster.store import DELETED, Change
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig

GOAL = Goal("<", 300, "ms")
GPUS_PER_NODE = 8
WAIT_SECONDS = 30.0
"""Real seconds to wait for the last edit after the last arrival; reached only when one never comes."""


class RunningCommits:
    """When each pod's change to phase Running was committed, by pod name (heard on the sim's thread)."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, change: Change) -> None:
        if change.resource != "pods" or change.type == DELETED:
            return
        now = change.obj.get("status", {}).get("phase")
        before = (change.old or {}).get("status", {}).get("phase")
        if now == "Running" and before != "Running":
            with self._lock:
                self.at.setdefault(change.obj["metadata"]["name"], time.time())


def first_edit_after(stage: rig.Stage, made: workloads.Made, committed: float) -> float | None:
    """Seconds from the commit to the first chat.update of this root saying Running, if there is one."""
    for call in stage.slack.calls("chat.update"):
        said = str(call.params.get("text", ""))
        if call.params.get("ts") == made.thread_ts and call.at >= committed and "Running" in said:
            return call.at - committed
    return None


def latencies(
    stage: rig.Stage, followed: list[workloads.Made], commits: RunningCommits
) -> list[float] | None:
    found = []
    for made in followed:
        committed = commits.at.get(made.name)
        seconds = None if committed is None else first_edit_after(stage, made, committed)
        if seconds is None:
            return None
        found.append(seconds * 1000)
    return found


def run(quick: bool) -> Report:
    count, gap = (3, 1.0) if quick else (16, 3.0)
    channel_names = [c for c, _ in workloads.channels(1)][:1]
    nodes = workloads.nodes_for(2 * count, GPUS_PER_NODE) + 1
    config = SlackConfig(channels=workloads.channels(1), rate_limits=RateLimitConfig(enabled=False))
    with rig.stage(world.WorldConfig(speed=1.0, gpu_pool=False), config) as stage:
        workloads.add_pool(
            stage.sim, workloads.gpu_pool(gpus_per_node=GPUS_PER_NODE, max_nodes=nodes, ready_nodes=nodes)
        )
        commits = RunningCommits()
        stage.on_commit(commits)
        bot = rig.BotProcess(stage, GPUBOT_SCALE_CHANNEL="C_OPS")
        notifier = pollers.PhaseNotifier(
            stage.sim.url, WebClient(token=stage.slack.bot_token, base_url=stage.slack.api_url), role="poller"
        )
        factory = workloads.Factory(stage.sim, stage.slack, image=workloads.SMALL)
        followed: list[workloads.Made] = []
        polled: list[workloads.Made] = []
        try:
            bot.start_and_wait(stage)
            notifier.start()
            for _ in range(count):
                followed += factory.make(1, channel_names)
                polled += factory.make(1, channel_names, role="poller")
                time.sleep(gap)
            bot_ms = rig.wait_for(
                lambda: latencies(stage, followed, commits), timeout=WAIT_SECONDS, what="gpubot's edits"
            )
            poll_ms = rig.wait_for(
                lambda: latencies(stage, polled, commits), timeout=WAIT_SECONDS, what="the poller's edits"
            )
        finally:
            notifier.stop()
            bot.kill()  # measured by then: how it exits is no part of the figure
    base = "5 s poller"
    what = f"pod Running → root edited, {count} workloads"
    shown = [
        Figure(
            "P2", f"event → Slack p50, {what}", figures.median(bot_ms), "ms", figures.median(poll_ms), base
        ),
        Figure(
            "P2",
            f"event → Slack p95, {what}",
            figures.percentile(bot_ms, 95),
            "ms",
            figures.percentile(poll_ms, 95),
            base,
            GOAL,
        ),
    ]
    notes = [
        f"One workload every {gap:g} s on a warm pool, the sim on the wall clock; from the sim's commit of "
        "phase Running to the emulator receiving the root's chat.update. Baseline: a poller listing pods "
        "every 5 s.",
    ]
    return Report("P2", "event → Slack latency", shown, {"gpubot": bot_ms, base: poll_ms}, notes)


def main() -> int:
    return figures.cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
