"""P4: resident memory of `gpubot serve` while it tracks 1,000 workloads, against the same process idle.

The bot is its own OS process, so its memory is read from the kernel (/proc/PID/status: VmRSS now, VmHWM
the peak), once when it has started and leads with nothing to track (the baseline), and once every
workload is Running and the bot has seen each one Running (`bench.fleet`). Its Slack outbox still
holds the edits and replies a thousand new threads make (Slack paces them); they are counted with it.

    .venv/bin/python -m bench.memory [--quick]
"""

from __future__ import annotations

from bench import figures, fleet
from bench.figures import Figure, Goal, Report

MIB = 1024 * 1024
GOAL = Goal("<", 120, "MiB")


def run(quick: bool) -> Report:
    size = 10 if quick else 1000
    with fleet.fleet(size, quick=quick) as crowd:
        crowd.settle()
        idle = crowd.bot.memory()
        crowd.grow_to(size)
        tracking = crowd.bot.memory()
        queued = crowd.bot.metric("gpubot_slack_outbox_depth")
    base = "same process, started, 0 workloads"
    shown = [
        Figure(
            "P4",
            f"RSS tracking {size:,} workloads",
            tracking["VmRSS"] / MIB,
            "MiB",
            idle["VmRSS"] / MIB,
            base,
            GOAL,
        ),
        Figure(
            "P4",
            f"peak RSS (VmHWM) up to {size:,} workloads",
            tracking["VmHWM"] / MIB,
            "MiB",
            idle["VmHWM"] / MIB,
            base,
        ),
    ]
    notes = [
        f"`gpubot serve` as a process; /proc/PID/status read at start and with {size:,} workloads Running; "
        f"its Slack outbox then held {queued or 0:.0f} queued calls.",
    ]
    series = {"idle MiB": [idle["VmRSS"] / MIB], "tracking MiB": [tracking["VmRSS"] / MIB]}
    return Report("P4", "memory", shown, series, notes)


def main() -> int:
    return figures.cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
