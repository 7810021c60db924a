"""P7: the time to Running that gpubot adds, against the same pod created directly with the Kubernetes client.

The sim runs on the wall clock (speed 1) with a warm GPU pool and a small image, so a pod created directly
runs about two seconds later. In turns, in one run: the bench creates gpubot's pod spec itself (without
gpubot's label, so the bot ignores it) through the official client, or a user types `/gpu run` with the
same image and the bot creates it (quota check, thread root, then the pod). Each is timed from the
request (the create call; the command leaving the emulator) to the sim committing the pod Running.

    .venv/bin/python -m bench.overhead [--quick]
"""

from __future__ import annotations

import time
from typing import Any, cast

from bench import figures, rig, workloads
from bench.event_latency import RunningCommits
from bench.figures import Figure, Goal, Report
from bot.core import labels
from sim.cluster import world
from sim.slack.emulator import SlackConfig

GOAL = Goal("<", 1, "s")
RUN = f"run {workloads.SMALL} -- sleep 86400"
WAIT_SECONDS = 60.0


def pod_of(stage: rig.Stage, owner: str) -> str | None:
    """The name of the pod the bot made for `owner`, once it exists."""
    for pod in stage.sim.pods():
        if pod["metadata"].get("labels", {}).get(labels.OWNER_LABEL) == labels.to_label_value(owner):
            return str(pod["metadata"]["name"])
    return None


def through_bot(stage: rig.Stage, commits: RunningCommits, index: int) -> float:
    owner = f"U{index:04d}"
    started = time.time()
    delivery = stage.slack.type_command(owner, workloads.channels(1)[0][0], "/gpu", RUN)
    assert delivery.acked, delivery
    name = rig.wait_for(lambda: pod_of(stage, owner), timeout=WAIT_SECONDS, what="the bot's pod")
    return rig.wait_for(lambda: commits.at.get(name), timeout=WAIT_SECONDS, what="Running") - started


def direct(stage: rig.Stage, factory: workloads.Factory, commits: RunningCommits, index: int) -> float:
    manifest = workloads.unmanaged(
        factory.manifest(index, workloads.channels(1)[0][0], ""), name=f"direct-{index:04d}", role="direct"
    )
    started = time.time()
    factory.api.create_namespaced_pod("default", cast(Any, manifest))
    name = manifest["metadata"]["name"]
    return rig.wait_for(lambda: commits.at.get(name), timeout=WAIT_SECONDS, what="Running") - started


def run(quick: bool) -> Report:
    samples = 2 if quick else 6
    config = SlackConfig(users=workloads.users(2 * samples), channels=workloads.channels(1))
    with rig.stage(world.WorldConfig(speed=1.0, gpu_pool=False), config) as stage:
        nodes = workloads.nodes_for(2 * samples, 8) + 1
        workloads.add_pool(stage.sim, workloads.gpu_pool(gpus_per_node=8, max_nodes=nodes, ready_nodes=nodes))
        commits = RunningCommits()
        stage.on_commit(commits)
        factory = workloads.Factory(stage.sim, stage.slack, image=workloads.SMALL)
        bot = rig.BotProcess(stage)
        try:
            bot.start_and_wait(stage)
            by_bot, by_client = [], []
            for i in range(samples):
                by_client.append(direct(stage, factory, commits, 2 * i + 1))
                by_bot.append(through_bot(stage, commits, 2 * i + 2))
        finally:
            bot.kill()  # measured by then: how it exits is no part of the figure
    bot_s, client_s = figures.median(by_bot), figures.median(by_client)
    base = "same pod, Kubernetes client"
    shown = [
        Figure("P7", f"time to Running via `/gpu run`, median of {samples}", bot_s, "s", client_s, base),
        Figure(
            "P7", "time to Running added by gpubot (median difference)", bot_s - client_s, "s", None, "", GOAL
        ),
    ]
    notes = [
        "Sim on the wall clock, warm pool, a 2 s image pull; from the request to the sim's commit of phase "
        "Running; direct creations and `/gpu run` alternate (a node pulls the image once, then has it). "
        f"gpubot {', '.join(f'{v:.2f}' for v in by_bot)} s; "
        f"client {', '.join(f'{v:.2f}' for v in by_client)} s.",
    ]
    return Report("P7", "overhead", shown, {"gpubot": by_bot, base: by_client}, notes)


def main() -> int:
    return figures.cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
