"""Each bench runs end to end at its quick size and reports well-formed figures. No timing is judged here:
the figures are what `make bench` is for; this only proves every measure still runs and says something."""

from __future__ import annotations

import importlib
import json
import math

import pytest

from bench import report
from bench.figures import Figure, Goal, Report

pytestmark = pytest.mark.usefixtures("slack_env")

BENCHES = [
    ("P1", "ack_latency"),
    ("P2", "event_latency"),
    ("P3", "api_load"),
    ("P4", "memory"),
    ("P5", "slack_calls"),
    ("P7", "overhead"),
]


def well_formed(figure: Figure, measure: str) -> None:
    assert figure.measure == measure and figure.name
    assert math.isfinite(figure.value)
    if figure.baseline is not None:
        assert math.isfinite(figure.baseline) and figure.baseline_name
    if figure.goal is not None:
        assert figure.met in (True, False)


@pytest.mark.parametrize(("measure", "module"), BENCHES)
def test_bench_runs_and_reports(measure: str, module: str) -> None:
    found: Report = importlib.import_module(f"bench.{module}").run(True)
    assert found.measure == measure and found.figures and found.notes
    for figure in found.figures:
        well_formed(figure, measure)
    assert any(f.goal is not None for f in found.figures), "every measure is held to a goal"
    again = Report.from_json(json.loads(json.dumps(found.to_json())))
    assert again == found
    page = report.render({"reports": [found.to_json()], "machine": {}}, None)
    assert all(f.name in page for f in found.figures)


def test_the_page_holds_a_row_for_p6_until_its_bench_writes_one() -> None:
    p99 = Figure("P1", "ack p99", 12.0, "ms", 6.0, "bare", Goal("<", 50, "ms"))
    p1 = Report("P1", "ack", [p99], {}, ["n"])
    page = report.render({"reports": [p1.to_json()], "machine": {"nproc": "2"}}, None)
    assert "| P1 | ack p99 | 12 ms | 6 ms (bare) | 2.00x | < 50 ms | yes |" in page
    assert "| P6 | GPU-hours trace | not measured yet" in page
    p6 = Report("P6", "gpu hours", [Figure("P6", "GPU-hours saved", 3.0, "h")], {}, ["replayed"])
    page = report.render({"reports": [p1.to_json()], "machine": {}}, p6)
    assert "not measured yet" not in page and "| P6 | GPU-hours saved | 3 h |" in page
