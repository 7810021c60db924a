"""The whole suite: every measure in its own process, then results.json, docs/benchmarks.md and the plots.

    .venv/bin/python -m bench            # full sizes → docs/bench/results.json, docs/benchmarks.md
    .venv/bin/python -m bench --quick    # small sizes → build/bench-quick/
    .venv/bin/python -m bench --only P1,P3

A measure whose module is missing is skipped with a message (P6, `bench.gpu_hours`, is built apart); one
that fails is reported as failed, and the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import figures, plots, report

MEASURES = (
    ("P1", "ack_latency"),
    ("P2", "event_latency"),
    ("P3", "api_load"),
    ("P4", "memory"),
    ("P5", "slack_calls"),
    ("P6", "gpu_hours"),
    ("P7", "overhead"),
)
FULL_OUT = Path("docs/bench")
QUICK_OUT = Path("build/bench-quick")


def machine() -> dict[str, Any]:
    """What the figures ran on, read now: core count, CPU model, RAM, Python, load."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return {
        "nproc": nproc or str(os.cpu_count()),
        "cpu_model": cpu,
        "ram_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "load_start": round(os.getloadavg()[0], 2),
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.stdout.strip() or "unknown",
    }


def run_one(module: str, json_path: Path, quick: bool) -> tuple[int, float]:
    """Run one bench as its own process, its output streaming here."""
    command = [sys.executable, "-m", f"bench.{module}", "--json", str(json_path)] + (
        ["--quick"] if quick else []
    )
    env = dict(os.environ) | ({figures.QUICK_ENV: "1"} if quick else {})
    started = time.monotonic()
    code = subprocess.run(command, env=env, check=False).returncode
    return code, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, into build/bench-quick/")
    parser.add_argument("--out", type=Path, default=None, help="where results.json and the plots go")
    parser.add_argument("--only", default="", help="comma-separated measures, e.g. P1,P3")
    args = parser.parse_args(argv)
    out = args.out or (QUICK_OUT if args.quick else FULL_OUT)
    out.mkdir(parents=True, exist_ok=True)
    wanted = {m.strip().upper() for m in args.only.split(",") if m.strip()}
    found = machine()
    started = time.monotonic()
    reports, failures = [], []
    # One at a time: each measure loads both cores (the sim and the emulator here, the bot beside them).
    with tempfile.TemporaryDirectory(prefix="gpubot-bench-results-") as tmp:
        for measure, module in MEASURES:
            if wanted and measure not in wanted:
                continue
            if importlib.util.find_spec(f"bench.{module}") is None:
                print(f"\n{measure}: bench.{module} does not exist (yet); skipped", flush=True)
                continue
            # P6 keeps its own file next to results.json, so it can also be run and re-rendered alone.
            path = out / report.P6_FILE if measure == "P6" else Path(tmp) / f"{module}.json"
            print(f"\n== {measure} bench.{module}{' --quick' if args.quick else ''}", flush=True)
            code, took = run_one(module, path, args.quick)
            print(f"   ({measure} took {took:.0f} s)", flush=True)
            if code != 0 or not path.exists():
                failures.append({"measure": measure, "error": f"bench.{module} exited {code}"})
            elif measure != "P6":
                reports.append(json.loads(path.read_text()))
    found["load_end"] = round(os.getloadavg()[0], 2)
    found["took_seconds"] = round(time.monotonic() - started)
    command = "make bench-quick" if args.quick else "make bench"
    results = {
        "command": command,
        "quick": args.quick,
        "machine": found,
        "reports": reports,
        "failures": failures,
    }
    results_path = out / "results.json"
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    page = Path("docs/benchmarks.md") if out == FULL_OUT else out / "benchmarks.md"
    report.write(results_path, page)
    everything = [figures.Report.from_json(r) for r in reports]
    if plots.AVAILABLE:
        drawn = plots.draw(everything, out)
        print(f"\nplots: {', '.join(str(p) for p in drawn) or 'none'}")
    else:
        print("\nmatplotlib is not installed (pip install -e '.[dev,bench]'): no plots drawn")
    print(f"results: {results_path}; page: {page}; {found['took_seconds']} s in all")
    for failure in failures:
        print(f"FAILED {failure['measure']}: {failure['error']}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
