"""P6's trace and replay: the generator is pure and seeded, and a tiny day replays in every arm.

No timing is judged: what is asserted follows from the trace and the arms' rules, in simulated time.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import gpu_hours, gpu_hours_report, trace
from bench.trace import Job, Trace, User

MINUTE, HOUR = 60.0, 3600.0
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


# -- the generator -------------------------------------------------------------------------------------


def test_the_same_seed_makes_the_same_trace_and_another_seed_another() -> None:
    assert trace.generate(3).to_json() == trace.generate(3).to_json()
    assert trace.generate(3).jobs != trace.generate(4).jobs


def test_a_saved_trace_replays_as_it_was(tmp_path: Path) -> None:
    made = trace.generate(5, users=12)
    made.save(tmp_path / "day.json")
    assert Trace.load(tmp_path / "day.json") == made


def test_the_mix_has_every_kind_of_user_and_each_behaves_as_its_kind() -> None:
    day = trace.generate(7)
    kinds = {user.id: user.kind for user in day.users}
    assert sorted(set(kinds.values())) == sorted(trace.KINDS)
    assert {kinds[job.user] for job in day.jobs} == set(trace.KINDS)
    for job in day.jobs:
        if kinds[job.user] == trace.BATCH:
            assert not job.session and job.busy == ((0.0, job.length),) and job.release_after is None
        else:
            assert job.session and job.hours is None
            assert (job.release_after is None) == (kinds[job.user] == trace.FORGETFUL)
            assert 0 < job.busy_seconds < job.length


def test_jobs_are_runnable_as_written() -> None:
    day = trace.generate(11, users=40)
    assert len({job.name for job in day.jobs}) == len(day.jobs)
    for job in day.jobs:
        assert NAME.match(job.name) and len(job.name) <= 63
        assert job.arrives >= 7 * HOUR and job.arrives + job.length <= trace.LAST_END
        ends = [end for _, end in job.busy]
        starts = [start for start, _ in job.busy]
        assert all(a < b for a, b in job.busy) and ends[-1] <= job.length
        assert all(end <= start for end, start in zip(ends, starts[1:], strict=False))
        if job.hours is not None:
            assert job.hours * HOUR >= job.length + 15 * MINUTE
        assert f"--name {job.name}" in job.command("img") and job.command("img").startswith("run img ")


def test_a_team_too_small_for_every_kind_or_a_foreign_file_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3 users"):
        trace.generate(1, users=2)
    with pytest.raises(ValueError, match="not a GPU-hours trace"):
        Trace.from_json('{"format": 99}')


# -- a tiny replay ----------------------------------------------------------------------------------------


def tiny_day() -> Trace:
    """One of each: a 40-minute job; a session with a 70-minute meeting in it, released at its end; a
    half-hour session its owner forgets."""
    users = (
        User("U_T01", "user01", trace.BATCH, "C_TEAM1", 120.0),
        User("U_T02", "user02", trace.INTERACTIVE, "C_TEAM1", 120.0),
        User("U_T03", "user03", trace.FORGETFUL, "C_TEAM2", 120.0),
    )
    jobs = (
        Job("user01-job1", "U_T01", False, HOUR, 40 * MINUTE, ((0.0, 40 * MINUTE),), None, None),
        Job(
            "user02-nb1",
            "U_T02",
            True,
            HOUR,
            150 * MINUTE,
            ((0.0, 40 * MINUTE), (110 * MINUTE, 140 * MINUTE)),
            None,
            0.0,
        ),
        Job("user03-nb1", "U_T03", True, HOUR, 30 * MINUTE, ((0.0, 30 * MINUTE),), None, None),
    )
    return Trace(seed=0, pool_max_nodes=3, users=users, jobs=jobs, day_seconds=6 * HOUR)


def test_a_tiny_day_in_every_arm(redis_url: str) -> None:
    day = tiny_day()
    found = {
        arm: gpu_hours.run_arm(day, arm, redis_url=redis_url if arm == gpu_hours_report.GPUBOT else "")
        for arm in gpu_hours_report.ARMS
    }
    worked = sum(job.busy_seconds for job in day.jobs) / HOUR
    for outcome in found.values():
        assert not outcome.never_ran and not outcome.refused and not outcome.wrongful
        assert len(outcome.time_to_running_minutes) == len(day.jobs)
        assert abs(outcome.busy_gpu_hours - worked) < 0.05  # the same work, read from the sim's DCGM metric
        assert outcome.busy_gpu_hours < outcome.billed_node_hours

    none, culler, bot = (found[arm] for arm in gpu_hours_report.ARMS)
    assert none.reaps == []
    assert [h["job"] for h in none.held if h["ended"] == "end of day"] == ["user03-nb1"]
    assert [(r.job, r.why) for r in culler.reaps] == [("user03-nb1", "lease")]
    assert culler.reaps[0].at - HOUR >= 4 * HOUR  # created at the arrival, deleted past the fixed lease
    deleted = {(r.job, r.why) for r in bot.reaps}
    assert ("user03-nb1", "idle-release") in deleted
    assert not any(job == "user02-nb1" for job, _ in deleted)  # kept through the meeting, then released
    assert bot.notes["owner answers"].get("keep", 0) >= 1
    assert bot.billed_node_hours < culler.billed_node_hours < none.billed_node_hours
