"""P1: how fast `/gpu run` is acked when many arrive at once, against a bare Bolt app on the same emulator.

The Slack emulator times each Socket Mode envelope from the moment it is sent to the moment its ack is read
off the socket (`Delivery.ack_seconds`). One user each types `/gpu run` and all the commands leave at once.
gpubot runs as `gpubot serve`; the baseline is `bench.bare_bolt`, a Bolt app whose listener only acks, on
the same Socket Mode handler, so the difference is what gpubot does before its ack (parse, quota words)
and what its lazy listeners (creating pods, posting roots) take from the same process meanwhile.

    .venv/bin/python -m bench.ack_latency [--quick]
"""

from __future__ import annotations

import asyncio

from bench import figures, rig, workloads
from bench.figures import Figure, Goal, Report
from sim.cluster import world
from sim.slack.deliveries import Delivery
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.socket_mode import SocketModeConfig

RUN = f"run {workloads.CUDA} -- sleep 3600"
GOAL = Goal("<", 50, "ms")
ACK_TIMEOUT_MS = 3000.0


def burst(stage: rig.Stage, count: int, text: str) -> list[Delivery]:
    """Every user types the command at the same moment; the emulator delivers them concurrently."""
    users = [u.id for u in workloads.users(count)]
    channel = workloads.channels(1)[0][0]

    async def all_at_once() -> list[Delivery]:
        typed = (stage.slack.emulator.users.type_command(u, channel, "/gpu", text) for u in users)
        return list(await asyncio.gather(*typed))

    return stage.slack.call(all_at_once, timeout=120)


def measure(stage: rig.Stage, app: rig.Process, count: int) -> list[float]:
    """Milliseconds from envelope sent to ack read, for `count` commands at once; the app is stopped after.

    A command not acked within Slack's 3 s counts as 3 s (the user saw `operation_timeout` by then)."""
    try:
        if isinstance(app, rig.BotProcess):
            app.start_and_wait(stage)
        else:
            app.start()
            rig.wait_for(lambda: stage.slack.connections() >= 1, timeout=rig.STARTUP_SECONDS, what="baseline")
        burst(stage, count, "help")  # warms what every later burst reuses: imports, worker threads
        deliveries = burst(stage, count, RUN)
    finally:
        app.kill()  # measured by then: how it exits is no part of the figure
    rig.wait_for(lambda: stage.slack.connections() == 0, timeout=30, what="the app disconnecting")
    timeout = stage.slack.emulator.config.socket_mode.ack_timeout
    return [(d.ack_seconds if d.acked else timeout) * 1000 for d in deliveries]


def run(quick: bool) -> Report:
    count = 20 if quick else 100
    config = SlackConfig(
        users=workloads.users(count),
        channels=workloads.channels(1),
        rate_limits=RateLimitConfig(enabled=False),
        socket_mode=SocketModeConfig(ack_timeout=3.0),
    )
    with rig.stage(world.WorldConfig(), config) as stage:
        baseline = measure(stage, rig.ScriptProcess(stage, "bench.bare_bolt", name="bare-bolt"), count)
        bot = measure(stage, rig.BotProcess(stage), count)
    base = "bare Bolt app"
    what = f"{count} `/gpu run` at once"
    missed = [
        Figure(
            "P1",
            f"acks later than Slack's 3 s, {what}",
            float(sum(v >= ACK_TIMEOUT_MS for v in bot)),
            "",
            float(sum(v >= ACK_TIMEOUT_MS for v in baseline)),
            base,
            Goal("<=", 0, ""),
        )
    ]
    shown = [
        Figure("P1", f"ack latency p50, {what}", figures.median(bot), "ms", figures.median(baseline), base),
        Figure(
            "P1",
            f"ack latency p99, {what}",
            figures.percentile(bot, 99),
            "ms",
            figures.percentile(baseline, 99),
            base,
            GOAL,
        ),
        Figure("P1", f"ack latency max, {what}", max(bot), "ms", max(baseline), base),
        *missed,
    ]
    notes = [
        "From envelope sent to ack read, timed by the Slack emulator (Socket Mode); gpubot runs as `gpubot "
        "serve`, the baseline as a Bolt app whose listener only acks, on the same emulator, one after "
        "the other; each first gets a warm-up burst of `/gpu help` (worker threads started).",
    ]
    return Report("P1", "slash-command ack latency", shown, {"gpubot": bot, "bare Bolt app": baseline}, notes)


def main() -> int:
    return figures.cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
