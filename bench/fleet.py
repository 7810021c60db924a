"""Many tracked workloads at once, for the load benches (P3 API requests, P4 memory).

The workloads run: every pod is gpubot's own (`workloads.Factory`), scheduled and Running on a GPU pool
the Cluster Autoscaler grows from zero, eight GPUs a node, so a thousand workloads are a thousand Running
pods on 125 nodes, the steady state of a busy shared pool, reached through scale-ups as in real use. The
sim runs a manual clock: the bench moves it until every pod runs, waits for the bot to have seen each one
Running (its `gpubot_time_to_running_seconds` count), and during a measuring window moves it one
simulated second per real second, so the sim's time-driven work (watch timeouts, autoscaler scans) goes on
at its real pace while the bot's timers run on the wall clock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from bench import rig, workloads
from bot.core import labels
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig

GPUS_PER_NODE = 8
CHANNELS = 10
"""Thread roots spread over a few channels, as a large team's would be."""
SETUP_SECONDS = 900.0
"""Simulated seconds a growth may take (scale-up, boot, GPU plugin, image pull); reached only if stuck."""
CATCH_UP_SECONDS = 300.0
"""Real seconds for the bot to see every pod Running after the sim has them; reached only if stuck."""
SETTLE_SECONDS, QUICK_SETTLE_SECONDS = 3.0, 0.5
"""Real seconds between the bot catching up and a measurement, for in-flight work to finish."""


@dataclass
class Fleet:
    stage: rig.Stage
    bot: rig.BotProcess
    factory: workloads.Factory
    settle_seconds: float = SETTLE_SECONDS

    @property
    def size(self) -> int:
        return len(self.factory.made)

    def grow_to(self, size: int) -> None:
        """Add workloads until `size` are tracked and Running, and the bot has seen each one Running."""
        channel_names = [c for c, _ in workloads.channels(CHANNELS) if c != "C_OPS"]
        self.factory.make(size - self.size, channel_names)
        moved = 0.0
        while self.running() < size:
            if moved > SETUP_SECONDS:
                raise RuntimeError(
                    f"only {self.running()} of {size} pods Running after {moved:g} s simulated"
                )
            self.stage.sim.advance(
                1
            )  # a second per call: a busy step must finish within the sim's call timeout
            moved += 1
        rig.wait_for(
            lambda: (self.bot.metric("gpubot_time_to_running_seconds_count") or 0) >= size,
            timeout=CATCH_UP_SECONDS,
            what=f"the bot seeing {size} workloads Running",
            every=0.5,
        )
        self.settle()

    def settle(self) -> None:
        time.sleep(self.settle_seconds)

    def running(self) -> int:
        def count() -> int:
            return sum(
                1
                for pod in self.stage.sim.world.store.iter_raw("pods")
                if pod["metadata"].get("labels", {}).get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
                and workloads.is_running(pod)
            )

        return self.stage.sim.run(count)

    def pass_time(self, seconds: float) -> None:
        """Real time passes, and the sim's clock with it: one simulated second per real second."""
        started = time.monotonic()
        for second in range(1, int(seconds) + 1):
            self.stage.sim.advance(1)
            time.sleep(max(started + second - time.monotonic(), 0.0))


@contextlib.contextmanager
def fleet(max_size: int, *, quick: bool = False) -> Iterator[Fleet]:
    """The stage with a GPU pool big enough for `max_size` workloads, and `gpubot serve` leading on it;
    `quick` settles for a shorter while before each measurement."""
    config = SlackConfig(channels=workloads.channels(CHANNELS), rate_limits=RateLimitConfig(enabled=False))
    with rig.stage(world.WorldConfig(gpu_pool=False), config) as stage:
        pool = workloads.gpu_pool(
            gpus_per_node=GPUS_PER_NODE, max_nodes=workloads.nodes_for(max_size, GPUS_PER_NODE) + 1
        )
        workloads.add_pool(stage.sim, pool)
        bot = rig.BotProcess(stage, GPUBOT_SCALE_CHANNEL="C_OPS")
        try:
            bot.start_and_wait(stage)
            settle = QUICK_SETTLE_SECONDS if quick else SETTLE_SECONDS
            yield Fleet(stage, bot, workloads.Factory(stage.sim, stage.slack), settle)
        finally:
            bot.kill()  # what is measured is measured by then: its outbox's backlog need not drain
