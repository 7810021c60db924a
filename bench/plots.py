"""The figures' pictures (matplotlib, Agg backend), from a run's results: latency distributions and API load.

Needs the `bench` dependency group (`make bench` installs it from uv.lock); the runner skips the plots,
saying so, without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.figures import Report

pyplot: Any = None
try:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
except ImportError:  # the bench group is not installed
    pass

AVAILABLE = pyplot is not None


def _ecdf(axes: object, values: list[float], label: str) -> None:
    ordered = sorted(values)
    shares = [(i + 1) / len(ordered) for i in range(len(ordered))]
    steps = ([ordered[0], *ordered], [0.0, *shares])
    axes.step(*steps, where="post", label=f"{label} (n={len(ordered)})")  # type: ignore[attr-defined]


def latency(report: Report, path: Path, *, title: str, log: bool = False) -> None:
    assert pyplot is not None
    figure, axes = pyplot.subplots(figsize=(7, 4))
    for label, values in report.series.items():
        if values:
            _ecdf(axes, values, label)
    if log:
        axes.set_xscale("log")
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("milliseconds")
    axes.set_ylabel("share of samples at or below")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def api_load(report: Report, path: Path) -> None:
    assert pyplot is not None
    sizes = report.series.get("workloads", [])
    figure, axes = pyplot.subplots(figsize=(7, 4))
    for label, values in report.series.items():
        if label != "workloads" and values:
            axes.plot(sizes, values, marker="o", label=label)
    axes.set_xscale("log")
    axes.set_yscale("symlog", linthresh=1.0)  # linear below 1, so a zero shows as zero
    axes.set_xlabel("tracked workloads")
    axes.set_ylabel("API requests per minute")
    axes.set_title("Kubernetes API load in steady state")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def draw(reports: list[Report], directory: Path) -> list[Path]:
    """Every plot these reports have data for; returns the files written."""
    made = []
    for report in reports:
        if report.measure == "P1":
            path = directory / "p1_ack_latency.png"
            latency(report, path, title="Slash-command ack latency (Socket Mode)")
        elif report.measure == "P2":
            path = directory / "p2_event_latency.png"
            latency(report, path, title="Pod Running → thread root edited", log=True)
        elif report.measure == "P3":
            path = directory / "p3_api_load.png"
            api_load(report, path)
        else:
            continue
        made.append(path)
    return made
