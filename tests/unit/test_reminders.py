"""The reaper's words, exactly as an owner reads them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from bot.core import notebooks, notices, reaping, reminders, starts, status, workloads

END = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
POLICY = reaping.ReaperPolicy(idle_window=timedelta(minutes=45), idle_grace=timedelta(minutes=15))
WORKLOAD = workloads.Workload(
    name="gpu-u-alice-1a2b3c",
    namespace="gpubot",
    uid="u1",
    owner_id="U_ALICE",
    requester_name="alice",
    profile="t4",
    channel="C_GPU",
    thread_ts="1.0",
    lease_end=END,
    requested_at=END - timedelta(hours=4),
    gpus=1,
    phase="Running",
    node="gke-demo-gpu-pool-1",
    command="/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600",
    deletion_requested=False,
)
Act = reaping.Act


def test_the_reminder_and_the_nudge_name_the_deadline_and_offer_extend() -> None:
    remind = reminders.message(Act.REMIND, WORKLOAD, END - timedelta(minutes=15), POLICY)
    assert remind == notices.Reminder(
        ":hourglass_flowing_sand: The lease on `gpu-u-alice-1a2b3c` (1 GPU (t4)) ends "
        f"{notices.clock_time(END)}, in 15m00s. It will be deleted {notices.clock_time(END + POLICY.grace)} "
        "unless you extend it.",
        "gpubot/gpu-u-alice-1a2b3c",
        notices.Buttons(extend=True, release=True),
    )
    assert "ends Sun 14:00 UTC, in 15m00s. It will be deleted Sun 14:05 UTC" in notices.moments(remind.text)
    nudge = reminders.message(Act.NUDGE, WORKLOAD, END - timedelta(minutes=3), POLICY)
    assert notices.moments(nudge.text) == (
        ":alarm_clock: 8m00s left on `gpu-u-alice-1a2b3c` (1 GPU (t4)): it is deleted Sun 14:05 UTC. "
        "Extend it now if you still need it."
    )


def test_the_idle_warning_offers_keep_and_release() -> None:
    warning = reminders.message(Act.IDLE_WARN, WORKLOAD, END - timedelta(hours=2), POLICY)
    assert warning.buttons == notices.Buttons(keep=True, release=True)
    assert notices.moments(warning.text) == (
        ":zzz: The GPU of `gpu-u-alice-1a2b3c` (1 GPU (t4)) has been idle for 45m00s (under 5% use). "
        "It will be released Sun 12:15 UTC unless you keep it."
    )


NOTEBOOK = dataclasses.replace(WORKLOAD, profile="notebook", command="/gpu run --type notebook")
QUIET = notebooks.Verdict(True, notebooks.Evidence.NOTEBOOK, quiet_since=END - timedelta(hours=3))
UNREAD = notebooks.Verdict(
    True, notebooks.Evidence.GPU_UNREAD, why_unread="the API server could not reach its Jupyter"
)


def test_a_notebooks_idle_warning_says_its_kernels_were_quiet_too() -> None:
    warning = reminders.message(Act.IDLE_WARN, NOTEBOOK, END - timedelta(hours=2), POLICY, idleness=QUIET)
    assert warning.buttons == notices.Buttons(keep=True, release=True)
    assert notices.moments(warning.text) == (
        ":zzz: `gpu-u-alice-1a2b3c` (1 GPU (notebook)) has been idle: GPU idle 45m00s (under 5% use) and no "
        "notebook activity since Sun 11:00 UTC. It will be released Sun 12:15 UTC unless you keep it."
    )


def test_a_notebook_whose_jupyter_could_not_be_read_is_told_the_gpu_alone_decided() -> None:
    warning = reminders.message(Act.IDLE_WARN, NOTEBOOK, END - timedelta(hours=2), POLICY, idleness=UNREAD)
    assert notices.moments(warning.text) == (
        ":zzz: `gpu-u-alice-1a2b3c` (1 GPU (notebook)) has been idle: GPU idle 45m00s (under 5% use); its "
        "notebook's activity could not be read (the API server could not reach its Jupyter), so the GPU "
        "alone decided. It will be released Sun 12:15 UTC unless you keep it."
    )


def test_a_notebooks_release_says_what_it_was_judged_on() -> None:
    warned = dataclasses.replace(NOTEBOOK, marks=reaping.Marks(idle_warned_at=END - timedelta(hours=2)))
    released = reminders.message(
        Act.IDLE_RELEASE, warned, END - timedelta(minutes=105), POLICY, idleness=QUIET
    )
    assert notices.moments(released.text) == (
        ":wastebasket: Released `gpu-u-alice-1a2b3c` (1 GPU (notebook)) Sun 12:15 UTC: GPU idle 1h00m and no "
        "notebook activity since Sun 11:00 UTC, and nobody kept it. "
        "To run it again: `/gpu run --type notebook`"
    )


def test_the_status_line_of_an_idle_warned_notebook_says_on_what_evidence() -> None:
    marks = reaping.Marks(idle_warned_at=END - timedelta(minutes=10), idle_evidence=notebooks.mark(QUIET))
    line = status.workload_line(dataclasses.replace(NOTEBOOK, marks=marks), END, with_owner=False)
    assert notices.moments(line).endswith(
        " · idle: GPU idle 55m00s and no notebook activity since Sun 11:00 UTC"
    )
    gpu_only = dataclasses.replace(WORKLOAD, marks=reaping.Marks(idle_warned_at=END, idle_evidence="gpu"))
    assert status.workload_line(gpu_only, END, with_owner=False).endswith(" · idle: GPU idle 45m00s")
    assert " idle" not in status.workload_line(WORKLOAD, END, with_owner=False)


def test_reaps_say_what_when_why_and_how_to_run_again() -> None:
    expired = reminders.message(Act.EXPIRE, WORKLOAD, END + timedelta(minutes=5), POLICY)
    assert notices.moments(expired.text) == (
        ":wastebasket: Deleted `gpu-u-alice-1a2b3c` (1 GPU (t4)) Sun 14:05 UTC: "
        "its lease ended Sun 14:00 UTC and nobody extended it. "
        "To run it again: `/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 -- …`"
    )
    assert expired.buttons == notices.Buttons()
    warned = WORKLOAD.__class__(
        **{**vars(WORKLOAD), "marks": reaping.Marks(idle_warned_at=END - timedelta(hours=2))}
    )
    released = reminders.message(Act.IDLE_RELEASE, warned, END - timedelta(minutes=105), POLICY)
    assert "Sun 12:15 UTC: its GPU was idle for 1h00m and nobody kept it." in notices.moments(released.text)


def test_a_broken_start_says_how_long_why_in_the_clusters_words_and_what_to_do() -> None:
    pulling = dataclasses.replace(
        WORKLOAD,
        image="foo:bar",
        phase="Pending",
        start=starts.Start("ImagePullBackOff", 'Back-off pulling image "foo:bar"', END - timedelta(hours=3)),
    )
    event = 'Failed to pull image "foo:bar": rpc error: code = NotFound desc = foo:bar: not found'
    now = END - timedelta(hours=3) + timedelta(minutes=10, seconds=30)
    deleted = reminders.message(Act.BROKEN_START, pulling, now, POLICY, start_error=event)
    assert deleted == notices.Reminder(
        ":wastebasket: Deleted `gpu-u-alice-1a2b3c` (1 GPU (t4)) after 10m30s unable to start: the image "
        f"`foo:bar` could not be pulled (ImagePullBackOff: {event}). Check the image name and tag, then "
        "`/gpu run` again.",
        "gpubot/gpu-u-alice-1a2b3c",
    )
    hopeless = dataclasses.replace(pulling, start=starts.Start("InvalidImageName", "bad name", None))
    assert reminders.broken_start(hopeless, now).startswith(
        ":wastebasket: Deleted `gpu-u-alice-1a2b3c` (1 GPU (t4)) at once, as it can never start: the image "
        "name `foo:bar` is not valid (InvalidImageName: bad name)."
    )
    assert "would release (its start is broken)" in reminders.dry_run(Act.BROKEN_START, pulling)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("/gpu run img -- python train.py --token=s3cret", "To run it again: `/gpu run img -- …`"),
        ("/gpu run img --hours 2", "To run it again: `/gpu run img --hours 2`"),
        ("", "To run it again: `/gpu run …`"),
        ("/gpu run " + "i" * 300, "To run it again: `/gpu run " + "i" * 110 + "…`"),
    ],
)
def test_running_it_again_never_repeats_the_commands_arguments(command: str, said: str) -> None:
    workload = dataclasses.replace(WORKLOAD, command=command)
    assert reminders.rerun(workload) == said
