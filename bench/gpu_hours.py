"""P6, GPU-hours: a seeded 24-hour trace of a team replayed with no reaper, a time-only culler, and gpubot.

For each arm: billed GPU node-hours (each node from its VM's start to its deletion, as the cloud bills),
busy GPU-hours (the sim's DCGM metric at or above the reaper's 5 % threshold, per 15 s scrape), their
ratio, the node-hours saved against no reaper, time to Running (p50, p95), and wrongful reaps (a pod
deleted while its owner still wanted it). The same trace, sim and Cluster Autoscaler in every arm; the
gpubot arm is the real bot (bench/gpu_hours_bot.py). How each arm is driven: bench/gpu_hours_replay.py.

    .venv/bin/python -m bench.gpu_hours            # 40 users → docs/bench/gpu_hours.json, pool_size_24h.png
    .venv/bin/python -m bench.gpu_hours --quick    # 6 users, the first 6 hours → build/bench-quick/
    .venv/bin/python -m bench.gpu_hours --trace docs/bench/gpu_hours_trace.json   # replay a saved trace
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import sys
from pathlib import Path

from bench import figures, gpu_hours_bot, gpu_hours_ledger, gpu_hours_replay, gpu_hours_report, trace
from bench.gpu_hours_replay import Outcome
from bench.gpu_hours_report import ARMS, CULLER, GPUBOT, NO_REAPER
from bot import settings
from bot.testing import stages
from sim.cluster import world

SEED = 7
USERS, QUICK_USERS = 40, 6
QUICK_HOURS = 6
"""A quick run replays the first hours of its day only: a smoke run, not figures to quote."""
FULL_OUT, QUICK_OUT = Path("docs/bench"), Path("build/bench-quick")
TRACE_FILE, PLOT_FILE = "gpu_hours_trace.json", "pool_size_24h.png"
DEFAULT_POLICY = settings.ReaperSettings()


def run_arm(
    day: trace.Trace,
    arm: str,
    until: float | None = None,
    *,
    redis_url: str = "",
    policy: settings.ReaperSettings = DEFAULT_POLICY,
) -> Outcome:
    """One arm on a fresh sim, its GPU pool allowed to grow to the trace's maximum."""
    with stages.loopback_environment(), world.BackgroundWorld(world.WorldConfig()) as sim:
        sim.run(
            lambda: sim.world.registry.set_autoscaling(
                gpu_hours_ledger.POOL, enabled=True, min_size=0, max_size=day.pool_max_nodes
            )
        )
        ledger = gpu_hours_ledger.attach(sim, origin=gpu_hours_replay.origin(day))
        replay = gpu_hours_replay.Replay(day, sim, ledger)
        if arm == GPUBOT:
            with gpu_hours_bot.gpubot_arm(day, sim, ledger, redis_url=redis_url, reaper=policy) as bot:
                return replay.run(bot, until=until)
        driver = gpu_hours_replay.TimeOnlyCuller if arm == CULLER else gpu_hours_replay.Direct
        return replay.run(driver(day, sim, ledger), until=until)


def run_arms(day: trace.Trace, *, until: float | None, policy: settings.ReaperSettings) -> dict[str, Outcome]:
    """The arms in two processes of their own: gpubot's in one (its bot's threads share one interpreter),
    the baselines one after the other in the other. Every figure comes from simulated time only."""
    context = multiprocessing.get_context("spawn")  # never fork a process that may hold threads
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        bot = pool.submit(run_arm, day, GPUBOT, until, policy=policy)
        baselines = pool.submit(_run_baselines, day, until)
        found = baselines.result() | {GPUBOT: bot.result()}
    return {arm: found[arm] for arm in ARMS}


def _run_baselines(day: trace.Trace, until: float | None) -> dict[str, Outcome]:
    return {arm: run_arm(day, arm, until) for arm in (NO_REAPER, CULLER)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_hours", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_USERS} users, the first {QUICK_HOURS} h"
    )
    parser.add_argument("--json", type=Path, default=None, help="where the report goes (the plot beside it)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--users", type=int, default=None)
    parser.add_argument("--trace", type=Path, default=None, help="replay this saved trace instead")
    parser.add_argument("--idle-window", type=float, default=None, help="minutes; gpubot's default if unset")
    parser.add_argument("--idle-grace", type=float, default=None, help="minutes; gpubot's default if unset")
    args = parser.parse_args(argv)
    quick = args.quick or os.environ.get(figures.QUICK_ENV) == "1"
    out_json: Path = args.json or (QUICK_OUT if quick else FULL_OUT) / "gpu_hours.json"
    policy = dataclasses.replace(
        DEFAULT_POLICY,
        idle_window_minutes=args.idle_window or DEFAULT_POLICY.idle_window_minutes,
        idle_grace_minutes=DEFAULT_POLICY.idle_grace_minutes if args.idle_grace is None else args.idle_grace,
    )
    if args.trace is not None:
        day = trace.Trace.load(args.trace)
    else:
        day = trace.generate(args.seed, users=args.users or (QUICK_USERS if quick else USERS))
        day.save(out_json.parent / TRACE_FILE)
    until = gpu_hours_replay.origin(day) + QUICK_HOURS * 3600 if quick else None
    print(
        f"replaying {len(day.jobs)} runs of {len(day.users)} users in each arm: {', '.join(ARMS)}", flush=True
    )
    found = run_arms(day, until=until, policy=policy)
    report = gpu_hours_report.build(day, found, policy)
    print("\n" + "\n".join(gpu_hours_report.table(found)))
    figures.print_report(report)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(
        json.dumps(report.to_json() | {"arms": gpu_hours_report.details(found)}, indent=2) + "\n"
    )
    plotted = gpu_hours_report.plot(found, day, out_json.parent / PLOT_FILE)
    print(f"\nwrote {out_json}" + (f" and {out_json.parent / PLOT_FILE}" if plotted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
