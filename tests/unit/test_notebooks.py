"""A notebook is idle only when its GPU is and its Jupyter is quiet; what it was judged on, in words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core import notebooks, notices

NOW = datetime(2026, 3, 1, 15, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=45)
Evidence = notebooks.Evidence


def activity(minutes_ago: float, busy: int = 0) -> notebooks.Activity:
    return notebooks.Activity(NOW - timedelta(minutes=minutes_ago), busy)


@pytest.mark.parametrize(
    ("gpu_idle", "reading", "idle", "evidence"),
    [
        (True, None, True, Evidence.GPU),  # a profile without activity: the GPU alone
        (False, None, False, Evidence.GPU),
        (True, activity(60), True, Evidence.NOTEBOOK),  # both quiet for the window
        (True, activity(45), True, Evidence.NOTEBOOK),  # exactly the window
        (True, activity(10), False, Evidence.NOTEBOOK),  # typing in a kernel, GPU at 0 %
        (True, activity(60, busy=1), False, Evidence.NOTEBOOK),  # a long cell that prints nothing
        (False, activity(60), False, Evidence.NOTEBOOK),  # the GPU busy from a script
        (True, notebooks.Unread("x"), True, Evidence.GPU_UNREAD),  # unread: the GPU decides
        (False, notebooks.Unread("x"), False, Evidence.GPU_UNREAD),
    ],
)
def test_idle_only_when_the_gpu_is_and_jupyter_shows_nothing_within_the_window(
    gpu_idle: bool, reading: notebooks.Reading | None, idle: bool, evidence: Evidence
) -> None:
    verdict = notebooks.judge(gpu_idle, reading, window=WINDOW, now=NOW)
    assert (verdict.idle, verdict.evidence) == (idle, evidence)


STATUS = {"started": "2026-03-01T13:00:00Z", "last_activity": "2026-03-01T14:05:00.123456Z", "kernels": 1}


def kernel(state: str, at: str) -> dict[str, Any]:
    return {"id": "k", "name": "python3", "last_activity": at, "execution_state": state, "connections": 1}


def test_jupyter_servers_answers_are_read_as_the_latest_activity_and_the_busy_kernels() -> None:
    read = notebooks.read(
        STATUS, [kernel("idle", "2026-03-01T14:20:00Z"), kernel("busy", "2026-03-01T13:00:00Z")]
    )
    assert read == notebooks.Activity(datetime(2026, 3, 1, 14, 20, tzinfo=UTC), busy_kernels=1)
    assert notebooks.read(STATUS, []) == notebooks.Activity(
        datetime(2026, 3, 1, 14, 5, 0, 123456, tzinfo=UTC)
    )


@pytest.mark.parametrize(
    ("status", "kernels"),
    [
        ("<html>login</html>", []),  # a login page, not the API
        (STATUS, {"kernels": []}),
        ({"started": "x"}, []),  # no last_activity
        (STATUS, [kernel("idle", "yesterday")]),
        (STATUS, ["k"]),
    ],
)
def test_an_answer_not_of_jupyter_servers_shape_is_unread(status: Any, kernels: Any) -> None:
    assert isinstance(notebooks.read(status, kernels), notebooks.Unread)


def test_the_words_say_which_evidence_was_used() -> None:
    quiet = notebooks.judge(True, activity(55), window=WINDOW, now=NOW)
    said = notices.moments(notebooks.evidence_text(quiet, timedelta(minutes=45)))
    assert said == "GPU idle 45m00s and no notebook activity since Sun 14:05 UTC"
    unread = notebooks.judge(
        True, notebooks.Unread("the API server could not reach its Jupyter"), window=WINDOW, now=NOW
    )
    assert notebooks.evidence_text(unread, timedelta(hours=1)) == (
        "GPU idle 1h00m; its notebook's activity could not be read (the API server could not reach its "
        "Jupyter), so the GPU alone decided"
    )
    assert notebooks.evidence_text(notebooks.Verdict(True), WINDOW) == "GPU idle 45m00s"


@pytest.mark.parametrize(
    "verdict",
    [
        notebooks.Verdict(True),
        notebooks.Verdict(True, Evidence.GPU_UNREAD),
        notebooks.Verdict(True, Evidence.NOTEBOOK, quiet_since=datetime(2026, 3, 1, 14, 5, tzinfo=UTC)),
    ],
)
def test_the_evidence_kept_on_the_pod_reads_back_the_same(verdict: notebooks.Verdict) -> None:
    assert notebooks.from_mark(notebooks.mark(verdict)) == verdict


def test_an_unknown_mark_reads_as_the_gpu_alone() -> None:
    assert notebooks.from_mark("") == notebooks.from_mark("notebook:soon") == notebooks.Verdict(True)
