"""docs/benchmarks.md, rendered from a run's results.json (and P6's gpu_hours.json): no figure typed by hand.

.venv/bin/python -m bench.report [--results docs/bench/results.json] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from bench.figures import Figure, Report, format_ratio, format_value

Json = dict[str, Any]
P6_FILE = "gpu_hours.json"
"""What `python -m bench.gpu_hours --json PATH` writes next to results.json; its rows join the table."""
TITLES = {
    "P1": "slash-command ack latency",
    "P2": "event → Slack latency",
    "P3": "Kubernetes API load",
    "P4": "memory",
    "P5": "Slack calls",
    "P6": "GPU-hours trace",
    "P7": "time-to-Running overhead",
}
COMMANDS = {
    "P1": "ack_latency",
    "P2": "event_latency",
    "P3": "api_load",
    "P4": "memory",
    "P5": "slack_calls",
    "P6": "gpu_hours",
    "P7": "overhead",
}
PLOTS = {
    "P1": ("p1_ack_latency.png", "Ack latency, every command of the burst: gpubot and a bare Bolt app"),
    "P2": ("p2_event_latency.png", "Pod Running → root edited: gpubot's watches and a 5 s poller"),
    "P3": ("p3_api_load.png", "Kubernetes API requests per minute against tracked workloads"),
}
MISSED = {
    "P1": (
        "What gpubot does before an ack is its parse and answer; its acks wait for the CPU its slow halves "
        "take meanwhile (Bolt starts each lazy listener before it writes the ack; each creates a pod and "
        "posts a thread root) and for the sim and the emulator serving them, all on the machine's two "
        "cores. The bare Bolt app, which only acks, shows what the Socket Mode stack itself costs in the "
        "same run. Meeting the goal at this burst would take the slow half out of the acking process (a "
        "worker fed by a queue, in a process or Deployment of its own), so that acking never shares a "
        "core with it."
    ),
    "P3": (
        "What the bot asks in steady state is the leader's Lease renewal, one write per retry period "
        "(8 s by default, GPUBOT_LEADER_RETRY_SECONDS), whatever the number of workloads; the informers "
        "only watch, and the scale channel's drain check reads the tracker's informer, not the API. A "
        "longer retry period (and lease) cuts it further, at the cost of a slower takeover."
    ),
    "P4": (
        "The baseline column is the same process before it tracks anything, and most of it is imports: the "
        "official Kubernetes client loads every one of its models with the package (importing "
        "`kubernetes.client` alone takes a bare interpreter from about 11 to 56 MiB of peak RSS), then "
        "slack_bolt and slack_sdk, redis, APScheduler and prometheus_client. That leaves about 20 KB per "
        "workload under the goal. What grows with workloads: the pod informer keeps each pod (without "
        "`managedFields`) for its DELETED replay, the events informer keeps only each event's identity "
        "(nothing reads a deleted event), the tracker keeps each thread's progress and last "
        "status, and the outbox holds the edits and replies Slack has not yet let through. Meeting the goal "
        "would take a pod cache of only the fields the bot reads, queued calls kept serialised, and a "
        "lighter Kubernetes client than the official one this project is built on."
    ),
    "P5": (
        "The thread follows the pod live: its root is edited once per step it reaches (requested, waiting "
        "for a node, scale-up triggered, provisioning, Ready, scheduled, pulling, Running, released), never "
        "for a clock alone, and it replies at the moments a person waits for (scale-up, node Ready, "
        "Running, released, gone with what it cost, pool drained). The root and its step edits are more "
        "than eight calls before any reply, so eight would mean a thread that skips steps. Steps that come "
        "seconds apart in a real cluster are fewer calls than here: the outbox replaces a queued edit with "
        "a newer one, which the bench's stepped clock (each step answered before the next) never lets "
        "happen."
    ),
}


def figures_of(reports: list[Report]) -> list[Figure]:
    return [f for r in reports for f in r.figures]


def machine_lines(machine: Json) -> list[str]:
    return [
        f"- CPU: {machine.get('cpu_model', '?')}, {machine.get('nproc', '?')} cores (`nproc`)",
        f"- RAM: {machine.get('ram_gib', '?')} GiB; Python {machine.get('python', '?')}",
        f"- Load average (1 min) at start {machine.get('load_start', '?')}, "
        f"at end {machine.get('load_end', '?')} (the machine is shared: others' work runs beside the bench)",
        f"- Run {machine.get('started', '?')}, {machine.get('took_seconds', '?')} s in all, "
        f"commit {machine.get('commit', '?')}",
    ]


def row(figure: Figure) -> str:
    met = {True: "yes", False: "**no**", None: ""}[figure.met]
    baseline = (
        f"{format_value(figure.baseline, figure.unit)} ({figure.baseline_name})"
        if figure.baseline is not None
        else "—"
    )
    goal = figure.goal.text() if figure.goal else "—"
    return (
        f"| {figure.measure} | {figure.name} | {format_value(figure.value, figure.unit)} | {baseline} | "
        f"{format_ratio(figure.ratio)} | {goal} | {met} |"
    )


def p6_placeholder() -> str:
    """P6 is built apart; until its bench writes gpu_hours.json, the table says so and how to fill it."""
    return (
        f"| P6 | {TITLES['P6']} | not measured yet: "
        f"`python -m bench.gpu_hours --json docs/bench/{P6_FILE}` fills this row | — | — | — | |"
    )


def render(
    results: Json, p6: Report | None, *, images: str = "bench/", source: str = "docs/bench/results.json"
) -> str:
    """The page; `images` is where the plots are, relative to it; `source` the results file it shows."""
    reports = [Report.from_json(r) for r in results.get("reports", [])]
    if p6 is not None:
        reports = [r for r in reports if r.measure != "P6"] + [p6]
    reports.sort(key=lambda r: r.measure)
    quick = " (quick sizes: not the figures to quote)" if results.get("quick") else ""
    lines = [
        "# Benchmarks",
        "",
        f"Rendered by `{results.get('command', 'make bench')}` from `{source}`{quick}; "
        "do not edit by hand. Each measure runs its baseline in the same run, on the same machine.",
        "",
        "## Machine",
        "",
        *machine_lines(results.get("machine", {})),
        "",
        "## Figures",
        "",
        "| | figure | value | baseline | ratio | goal | met? |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    measured = {r.measure for r in reports}
    placeholder_due = "P6" not in measured
    for report in reports:
        if placeholder_due and report.measure > "P6":
            lines.append(p6_placeholder())
            placeholder_due = False
        lines += [row(f) for f in report.figures]
    if placeholder_due:
        lines.append(p6_placeholder())
    for failure in results.get("failures", []):
        lines.append(f"| {failure['measure']} | failed in this run: {failure['error']} | — | — | — | — | |")
    lines += ["", "## How each was measured", ""]
    for report in reports:
        command = f"`.venv/bin/python -m bench.{COMMANDS.get(report.measure, '?')}`"
        lines.append(f"**{report.measure} {TITLES.get(report.measure, report.title)}** ({command})")
        lines += [f"- {note}" for note in report.notes]
        if any(f.met is False for f in report.figures) and report.measure in MISSED:
            lines.append(f"- Goal missed; what it would take: {MISSED[report.measure]}")
        lines.append("")
    plots = [(m, *PLOTS[m]) for m in sorted(measured) if m in PLOTS]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{m}: {caption}]({images}{name})\n\n*{m}: {caption}.*\n" for m, name, caption in plots]
    lines += [
        "## Reproducing",
        "",
        "`make bench` runs every measure (minutes on 2 cores) and rewrites this page and `docs/bench/`;",
        "`make bench-quick` runs them at small sizes in under a minute, into `build/bench-quick/`.",
        "One measure alone: `.venv/bin/python -m bench.<name> [--quick] [--json PATH]`.",
        "",
    ]
    return "\n".join(lines)


def read_p6(directory: Path) -> Report | None:
    path = directory / P6_FILE
    return Report.from_json(json.loads(path.read_text())) if path.exists() else None


def write(results_path: Path, out: Path) -> None:
    results = json.loads(results_path.read_text())
    images = Path(os.path.relpath(results_path.parent, out.parent)).as_posix() + "/"
    shown = "" if images == "./" else images
    out.write_text(render(results, read_p6(results_path.parent), images=shown, source=str(results_path)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=Path("docs/bench/results.json"))
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args()
    write(args.results, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
