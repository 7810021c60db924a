"""What every benchmark reports: figures with baseline and goal, percentiles, and the JSON they travel in.

Each `bench.<name>` module runs its measure and its baseline in one run and hands back a `Report`; `cli`
prints it and, with `--json PATH`, writes it for the runner (`python -m bench`), which renders the docs
from those files only, so no figure in docs/benchmarks.md is ever typed by hand.

The contract for any bench module the runner starts (P6, `bench.gpu_hours`, follows it too):
`python -m bench.NAME [--quick] [--json PATH]`, where PATH receives `Report.to_json()`:

    {"measure": "P6", "title": "...", "figures": [Figure...], "series": {name: [numbers]}, "notes": [...]}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Json = dict[str, Any]
Op = Literal["<", "<="]
QUICK_ENV = "GPUBOT_BENCH_QUICK"
"""Set to 1 by the runner for `--quick`, for bench modules that read sizes from the environment."""


@dataclass(frozen=True)
class Goal:
    op: Op
    limit: float
    unit: str

    def met(self, value: float) -> bool:
        return value < self.limit if self.op == "<" else value <= self.limit

    def text(self) -> str:
        return f"{self.op} {self.limit:g} {self.unit}".strip()


@dataclass(frozen=True)
class Figure:
    measure: str
    """P1 … P7."""
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    goal: Goal | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None:
            return None
        if self.baseline == 0:
            return None if self.value else 1.0
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        return None if self.goal is None else self.goal.met(self.value)

    def to_json(self) -> Json:
        found = asdict(self)
        found["goal"] = None if self.goal is None else {**asdict(self.goal), "text": self.goal.text()}
        found["ratio"], found["met"] = self.ratio, self.met
        return found

    @classmethod
    def from_json(cls, data: Json) -> Figure:
        goal = data.get("goal")
        return cls(
            measure=str(data["measure"]),
            name=str(data["name"]),
            value=float(data["value"]),
            unit=str(data.get("unit", "")),
            baseline=None if data.get("baseline") is None else float(data["baseline"]),
            baseline_name=str(data.get("baseline_name", "")),
            goal=None if not goal else Goal(goal["op"], float(goal["limit"]), str(goal.get("unit", ""))),
            note=str(data.get("note", "")),
        )


@dataclass
class Report:
    measure: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    series: dict[str, list[float]] = field(default_factory=dict)
    """Raw samples for the plots, e.g. every ack latency of the bot and of its baseline."""
    notes: list[str] = field(default_factory=list)
    """How it was measured, in a sentence or two each; shown under the table."""

    def to_json(self) -> Json:
        return {
            "measure": self.measure,
            "title": self.title,
            "figures": [f.to_json() for f in self.figures],
            "series": self.series,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: Json) -> Report:
        return cls(
            measure=str(data["measure"]),
            title=str(data.get("title", "")),
            figures=[Figure.from_json(f) for f in data.get("figures", [])],
            series={str(k): [float(v) for v in vs] for k, vs in (data.get("series") or {}).items()},
            notes=[str(n) for n in data.get("notes", [])],
        )


# -- statistics -----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): always a value that was measured, never an interpolation."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


# -- showing --------------------------------------------------------------------------------------


def format_value(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    shown = f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}" if value else "0"
    return f"{shown} {unit}".strip()


def format_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def print_report(report: Report, out: Any = None) -> None:
    out = out or sys.stdout
    print(f"\n{report.measure} {report.title}", file=out)
    for f in report.figures:
        verdict = {True: "met", False: "MISSED", None: ""}[f.met]
        goal = f"goal {f.goal.text()} {verdict}" if f.goal else ""
        against = f"vs {f.baseline_name} {format_value(f.baseline, f.unit)} = {format_ratio(f.ratio)}"
        base = against if f.baseline is not None else ""
        print(f"  {f.name:<58} {format_value(f.value, f.unit):>12}  {base}  {goal}".rstrip(), file=out)
    for note in report.notes:
        print(f"  · {note}", file=out)


def write_report(path: Path, report: Report) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n")


def read_report(path: Path) -> Report:
    return Report.from_json(json.loads(path.read_text()))


# -- the command line every bench module shares -----------------------------------------------------


def cli(run: Callable[[bool], Report], argv: list[str] | None = None) -> int:
    """`python -m bench.NAME [--quick] [--json PATH]`: run, print, and write the report if asked."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a run under a minute")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    report = run(args.quick or os.environ.get(QUICK_ENV) == "1")
    print_report(report)
    if args.json is not None:
        write_report(args.json, report)
    return 0
