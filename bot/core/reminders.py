"""What the reaper says to an owner, as plain functions of the workload and the moment: tested as text."""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.core import notebooks, notices, reaping, starts, workloads

Act = reaping.Act


def _what(workload: workloads.Workload) -> str:
    return f"`{workload.name}` ({notices.format_gpus(workload.gpus, workload.profile)})"


RERUN_LIMIT = 120
"""Characters of the command shown again: enough for the image and options."""


def rerun(workload: workloads.Workload) -> str:
    """How to run it again, without the command's arguments: they may hold a secret, and this is said in a
    channel long after the owner typed it."""
    command, _, arguments = workload.command.partition(" -- ")
    if not command:
        return "To run it again: `/gpu run …`"
    shown = command if len(command) <= RERUN_LIMIT else command[: RERUN_LIMIT - 1] + "…"
    return f"To run it again: `{shown}{' -- …' if arguments else ''}`"


def message(
    act: Act,
    workload: workloads.Workload,
    now: datetime,
    policy: reaping.ReaperPolicy,
    *,
    start_error: str = "",
    idleness: notebooks.Verdict | None = None,
) -> notices.Reminder:
    """The thread reply (and, for reminders, the DM) for one act; its buttons say what the owner can do.
    `start_error`: the cluster's newest message about a failing start, quoted by a broken start's;
    `idleness`: what an idle warning or release was judged on (the GPU alone when None)."""
    end = workload.lease_end or now
    deadline = end + policy.grace
    key = workload.key
    if act is Act.REMIND:
        text = (
            f":hourglass_flowing_sand: The lease on {_what(workload)} ends {notices.clock_time(end)}, "
            f"in {notices.format_elapsed(end - now)}. It will be deleted {notices.clock_time(deadline)} "
            "unless you extend it."
        )
        return notices.Reminder(text, key, notices.Buttons(extend=True, release=True))
    if act is Act.NUDGE:
        text = (
            f":alarm_clock: {notices.format_elapsed(deadline - now)} left on {_what(workload)}: it is "
            f"deleted {notices.clock_time(deadline)}. Extend it now if you still need it."
        )
        return notices.Reminder(text, key, notices.Buttons(extend=True, release=True))
    if act is Act.IDLE_WARN:
        release_at = now + policy.idle_grace
        under = f" (under {policy.idle_threshold_percent:g}% use)"
        if _gpu_alone(idleness):
            window = notices.format_elapsed(policy.idle_window)
            idle = f"The GPU of {_what(workload)} has been idle for {window}{under}"
        else:
            idle = f"{_what(workload)} has been idle: {_evidence(idleness, policy.idle_window, under)}"
        text = f":zzz: {idle}. It will be released {notices.clock_time(release_at)} unless you keep it."
        return notices.Reminder(text, key, notices.Buttons(keep=True, release=True))
    if act is Act.EXPIRE:
        text = (
            f":wastebasket: Deleted {_what(workload)} {notices.clock_time(now)}: its lease ended "
            f"{notices.clock_time(end)} and nobody extended it. {rerun(workload)}"
        )
    elif act is Act.IDLE_RELEASE:
        idle_for = policy.idle_window + (now - (workload.marks.idle_warned_at or now))
        idle = (
            f"its GPU was idle for {notices.format_elapsed(idle_for)}"
            if _gpu_alone(idleness)
            else f"{_evidence(idleness, idle_for)},"
        )
        text = (
            f":wastebasket: Released {_what(workload)} {notices.clock_time(now)}: {idle} and nobody kept it. "
            f"{rerun(workload)}"
        )
    elif act is Act.BROKEN_START:
        text = broken_start(workload, now, start_error)
    elif act is Act.CLEAN_FINISHED:
        ended = workload.finished_at or now
        text = (
            f":broom: Cleaned up the finished pod {_what(workload)}; it ended {notices.clock_time(ended)}. "
            f"{rerun(workload)}"
        )
    else:
        text = f"{_what(workload)} is busy again; the idle warning no longer applies."
    return notices.Reminder(text, key)


def broken_start(workload: workloads.Workload, now: datetime, start_error: str = "") -> str:
    """Why a pod that could not start was deleted, in its own words, and what to do before running again."""
    start = workload.start
    what, fix = starts.describe(start, image=workload.image, detail=start_error)
    took = starts.waited(start, now)
    if start.reason in starts.HOPELESS or not took:
        return f":wastebasket: Deleted {_what(workload)} at once, as it can never start: {what}. {fix}"
    return f":wastebasket: Deleted {_what(workload)} after {took} unable to start: {what}. {fix}"


def removed_outside(workload: workloads.Workload) -> str:
    """A finished pod deleted by neither its owner nor the reaper: a node scale-down takes finished pods with
    the node, and anyone with cluster access may delete one. Said so its thread does not stop at "Failed"."""
    return (
        f":broom: Cleaned up by the cluster: the finished pod {_what(workload)} was deleted outside gpubot "
        f"(a scale-down takes finished pods with their node). {rerun(workload)}"
    )


INVITE = "`/invite @gpubot`"
THREAD_REFUSED_NOTES = {
    "not-member": f"I am not a member of that channel (any more). Invite me back with {INVITE} there to "
    "follow your runs in it.",
    "archived": "that channel is archived.",
    "gone": f"that channel is gone, or private without me in it (invite me with {INVITE}).",
}


def thread_refused_note(why: str) -> str:
    """Why a message came by DM rather than in its thread (`why`: `errors.Why`, else Slack refused it)."""
    return THREAD_REFUSED_NOTES.get(why, "Slack refused the message there.")


DRY_RUN_VERBS = {Act.BROKEN_START: "release (its start is broken)"}


def dry_run(act: Act, workload: workloads.Workload) -> str:
    verb = DRY_RUN_VERBS.get(act, act.value.replace("-", " "))
    return f":test_tube: Dry run: the reaper would {verb} `{workload.name}` now."


def _gpu_alone(idleness: notebooks.Verdict | None) -> bool:
    """Judged on a workload's GPU only, as for any profile without an `activity:`."""
    return idleness is None or idleness.evidence is notebooks.Evidence.GPU


def _evidence(idleness: notebooks.Verdict | None, gpu_idle_for: timedelta, under: str = "") -> str:
    return notebooks.evidence_text(idleness or notebooks.Verdict(True), gpu_idle_for, under=under)
