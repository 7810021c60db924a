"""P3: what tracking costs the Kubernetes API in steady state, at 10, 100 and 1,000 workloads.

`gpubot serve` tracks every workload with three informers (pods, events, nodes) and holds a Lease; the
sim counts every request by User-Agent, verb and resource, and every watch open (`sim.cluster.traffic`).
At each size the bench waits until the bot has seen every workload Running (`bench.fleet`), then counts
the bot's requests over a window in which time passes normally. The baseline, in the same run and on
the same pods, is per-pod polling: a GET of each tracked pod every 5 s (`pollers.PodPoller`).

    .venv/bin/python -m bench.api_load [--quick]
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench import figures, fleet, pollers, rig
from bench.figures import Figure, Goal, Report

REQUESTS_GOAL = Goal("<", 10, "req/min")
WATCHES_GOAL = Goal("<=", 5, "")
LEASES = "leases"


@dataclass(frozen=True)
class Load:
    size: int
    per_minute: float
    without_lease: float
    watches: int
    breakdown: str
    polled_per_minute: float
    poller_note: str


def measure(crowd: fleet.Fleet, size: int, seconds: float) -> Load:
    """The bot and the per-pod poller over one window: the sim counts each by its User-Agent."""
    poller = pollers.PodPoller(crowd.stage.sim.url, (m.name for m in crowd.factory.made))
    crowd.stage.reset_traffic()
    started = time.monotonic()
    poller.start()
    try:
        crowd.pass_time(seconds)
    finally:
        poller.stop()
    elapsed = time.monotonic() - started
    traffic = crowd.stage.traffic()
    found = rig.bot_requests(traffic)
    total = sum(int(r["count"]) for r in found)
    lease = sum(int(r["count"]) for r in found if r["resource"] == LEASES)
    peak = max(
        (n for agent, n in traffic["peakWatches"].items() if agent.startswith(rig.BOT_AGENT_PREFIX)),
        default=0,
    )
    polled = sum(int(r["count"]) for r in rig.agent_requests(traffic, pollers.POD_POLLER_AGENT))
    return Load(
        size,
        per_minute=total * 60 / elapsed,
        without_lease=(total - lease) * 60 / elapsed,
        watches=int(peak),
        breakdown=", ".join(f"{r['verb']} {r['resource']} {r['count']}" for r in found) or "none",
        polled_per_minute=polled * 60 / elapsed,
        poller_note=f"{poller.rounds} rounds, {poller.late_rounds} over their 5 s",
    )


def run(quick: bool) -> Report:
    # A full window holds whole Lease renewal periods (8 s), so the count is not a matter of where it
    # falls; a quick one is under half a period, and its count with the Lease is 0 or 1 renewal.
    sizes, window = ((5, 20), 3.0) if quick else ((10, 100, 1000), 32.0)
    loads = []
    with fleet.fleet(max(sizes), quick=quick) as crowd:
        for size in sizes:
            crowd.grow_to(size)
            loads.append(measure(crowd, size, window))
    base = "GET per pod every 5 s"
    top = loads[-1]
    shown = [
        Figure(
            "P3",
            f"API requests/min at {load.size:,} workloads",
            load.per_minute,
            "req/min",
            load.polled_per_minute,
            base,
            REQUESTS_GOAL if load is top else None,
        )
        for load in loads
    ]
    shown += [
        Figure(
            "P3",
            f"API requests/min at {top.size:,} workloads, Lease renewals left out",
            top.without_lease,
            "req/min",
            top.polled_per_minute,
            base,
            REQUESTS_GOAL,
        ),
        Figure(
            "P3", f"watches open at {top.size:,} workloads", float(top.watches), "", None, "", WATCHES_GOAL
        ),
    ]
    notes = [
        f"Steady state: every workload Running; gpubot's requests and the poller's counted over the same "
        f"{window:g} s of real time (the sim's clock moving with it), told apart by User-Agent.",
        *(
            f"{load.size:,} workloads: gpubot {load.breakdown}; watches open {load.watches}; "
            f"poller {load.poller_note}"
            for load in loads
        ),
    ]
    series = {
        "workloads": [float(load.size) for load in loads],
        "gpubot": [load.per_minute for load in loads],
        "gpubot without Lease renewals": [load.without_lease for load in loads],
        base: [load.polled_per_minute for load in loads],
    }
    return Report("P3", "Kubernetes API load", shown, series, notes)


def main() -> int:
    return figures.cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
