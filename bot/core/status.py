"""Core: pure builders of what a thread and `/gpu status` show, from the tracker's and the cluster's view.

No I/O and no clock here: `now` comes in, notices go out, so the wording is tested without Slack or a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core import (
    connect,
    episodes,
    explain,
    lifecycle,
    models,
    notebooks,
    notices,
    podspec,
    reaping,
    workloads,
)

Step = lifecycle.Step
TIMELINE_LABELS: Mapping[Step, str] = {
    Step.ADMITTED: "admitted by Kueue",
    Step.SCALE_UP: "scale-up",
    Step.NODE_READY: "node Ready",
    Step.SCHEDULED: "scheduled",
    Step.RUNNING: "Running",
}
"""The steps a thread's timeline names: the ends of its waits. The others (node provisioning, GPU
allocatable, pulling) happen within seconds of one of these, or show as the headline while they last."""
IDLE_WINDOW = reaping.ReaperPolicy().idle_window
"""The reaper's default idle window, for lines shown where its settings are not at hand (App Home)."""
VERDICT_WAIT = timedelta(seconds=30)
"""How long a thread holds back the scheduler's "no node fits" for the autoscaler's verdict (a scale-up,
or why not), which comes within its scan interval (10 s by default: kubernetes/autoscaler,
cluster-autoscaler/FAQ.md, "What are the parameters to CA?", `scan-interval`): one edit instead of two."""


@dataclass(frozen=True)
class Thread:
    """One workload's conversation: the pod as last seen, its progress, and what each milestone said."""

    workload: workloads.Workload
    progress: lifecycle.Progress
    waiting_text: str = ""
    """Why it waits, as the scheduler first said it (its WAITING milestone): the headline while it waits."""
    problem: explain.Problem | None = None
    outcome_text: str = ""
    ending: str = ""
    """Once it is over: what it held and cost."""
    url: str = ""
    """What to open once its ports are forwarded (a notebook's URL with its token), once read."""


# -- the thread's status message ------------------------------------------------------------------


def timeline(progress: lifecycle.Progress) -> tuple[str, ...]:
    """What has happened to this pod, in order, each with how long after the request."""
    facts = [f"requested {notices.clock_time(progress.created)}"]
    for step, at in sorted(progress.reached, key=lambda reached: reached[1]):
        label = TIMELINE_LABELS.get(step)
        if label is None:
            continue
        if step == Step.SCALE_UP and progress.scale_up:
            label = f"scale-up {progress.scale_up.split(' (')[0]}"
        facts.append(f"{label} +{notices.format_elapsed(at - progress.created)}")
    return tuple(facts)


def sentence(text: str) -> str:
    """Upper-case the first letter only (`str.capitalize` would lower `GPU` and node names)."""
    return text[:1].upper() + text[1:]


DELETED_BY_REAPER = {
    reaping.Act.EXPIRE.value: "Deleted: its lease ended and nobody extended it",
    reaping.Act.IDLE_RELEASE.value: "Deleted by the idle reaper: its GPU sat idle",
    reaping.Act.BROKEN_START.value: "Deleted: it could not start",
}


def actor_phrase(owner_id: str, actor: str) -> str:
    """Who acted on a run, as its thread says it: "its owner", or "admin U0ADMIN"."""
    return "its owner" if actor == owner_id else f"admin {actor}"


def deleted_headline(workload: workloads.Workload) -> str:
    """Who deleted it, from the audit record written before the delete; the GPU is back either way."""
    record = podspec.recorded_delete(workload.audit) or {}
    back = "; its GPU is back in the pool"
    if record.get("action") == "release":
        return f"Released by {actor_phrase(workload.owner_id, str(record.get('actor')))}{back}"
    if record.get("action") == "reap":
        reason = str(record.get("reason", ""))
        return DELETED_BY_REAPER.get(reason, f"Deleted by gpubot ({reason or 'reaped'})") + back
    return f"Deleted outside gpubot{back}"


def in_line(thread: Thread) -> bool:
    """Waiting because its pool cannot grow (at its maximum, or the cloud's GPU quota is used up): in the
    line for GPUs that others hold."""
    progress = thread.progress
    return (
        progress.outcome is None
        and progress.step in (None, Step.WAITING)
        and thread.problem is not None
        and thread.problem.key in explain.IN_LINE
        and not thread.workload.deletion_requested
    )


def holds_gpus(thread: Thread) -> bool:
    """On a node and not over (a pod stopping holds its GPUs until it is gone)."""
    progress = thread.progress
    return progress.outcome is None and bool(progress.node)


def line_facts(thread: Thread) -> tuple[object, ...]:
    """What a workload means to its pool's line: waiting in it, or holding GPUs that come back when."""
    workload = thread.workload
    marks = workload.marks
    return (
        in_line(thread),
        holds_gpus(thread),
        workload.gpus,
        workload.lease_end,
        workload.deletion_requested,
        marks.idle_warned_at,
        marks.kept_until,
    )


def headline(thread: Thread, place: str = "") -> str:
    """The stage it is at, in words that stay true until the next stage: a thread is edited per stage."""
    progress = thread.progress
    if progress.outcome is lifecycle.Outcome.DELETED:
        return deleted_headline(thread.workload)
    if progress.outcome is not None:
        return sentence(thread.outcome_text) or "Finished"
    step, node = progress.step, progress.node
    if step == Step.RUNNING:
        return f"Running on {node}" if node else "Running"
    if step in (Step.SCHEDULED, Step.PULLING):
        return f"Starting on {node}" if node else "Starting"
    if step in (Step.PROVISIONING, Step.NODE_READY, Step.GPU_READY):
        coming = f"node {progress.coming}" if progress.coming else "its new node"
        return f"Waiting for {coming} to come up with its GPU"
    if step == Step.SCALE_UP:
        return f"Waiting for a GPU node: {progress.pool} scaling up {progress.scale_up}"
    if place and in_line(thread):
        return f"Waiting for a GPU: {place}"
    if step == Step.ADMITTED:
        return "Admitted by Kueue: waiting for the scheduler"
    if step == Step.WAITING:
        return sentence(thread.waiting_text or "waiting for a GPU node")
    if thread.workload.queue:
        return f"Waiting for Kueue to admit it (queue {thread.workload.queue})"
    return "Requested: waiting for the scheduler"


def awaiting_verdict(thread: Thread, now: datetime) -> bool:
    """Nothing but the scheduler has spoken yet (if even it has), and the autoscaler's verdict is due
    (VERDICT_WAIT): the root already says what was asked for, so one edit with the verdict, not two."""
    progress = thread.progress
    since = progress.at(Step.WAITING) or progress.created
    return (
        progress.step in (None, Step.WAITING)
        and progress.outcome is None
        and thread.problem is None
        and now - since < VERDICT_WAIT
    )


def has_output(progress: lifecycle.Progress) -> bool:
    """The container has started and the pod is still there, so `pods/log` has something to give."""
    return not progress.gone and (progress.outcome is not None or progress.at(Step.RUNNING) is not None)


def is_running(thread: Thread) -> bool:
    """Its container has started and not ended: there is something to connect to. A release in progress
    leaves the lines up until the pod is gone; taking them down would cost an edit of its own."""
    progress = thread.progress
    return progress.outcome is None and not progress.gone and progress.at(Step.RUNNING) is not None


def thread_status(thread: Thread, *, note: str = "", place: str = "") -> notices.ThreadStatus:
    """The edited root message; `note` is said while it waits, `place` is its place in line."""
    workload, over, lease = thread.workload, thread.progress.outcome is not None, thread.workload.lease_end
    return notices.ThreadStatus(
        namespace=workload.namespace,
        name=workload.name,
        owner=workload.owner_id,
        image=workload.image,
        gpus=workload.gpus,
        profile=workload.profile,
        headline=headline(thread, place),
        timeline=timeline(thread.progress),
        problem=None if over else thread.problem,
        ending=thread.ending if over else "",
        lease_end=None if over else lease,
        buttons=notices.Buttons(
            release=not over, extend=not over, logs=has_output(thread.progress), ask=bool(place) and not over
        ),
        note="" if over else note,
        connect=connect.connect_for(workload, thread.url) if is_running(thread) else None,
    )


def milestone_reply(milestone: lifecycle.Milestone, thread: Thread) -> notices.Reply | None:
    """The moments worth a notification; the other steps only reach the status message. The owner is
    mentioned where it is theirs to hear: it runs, it ended by itself, someone outside gpubot deleted it.
    A release or reap is said by whoever did it (`leases`, the reaper's tellings)."""
    owner = thread.workload.owner_id
    if milestone.problem is not None:
        return notices.Reply(f":warning: {milestone.problem.summary}. Fix: {milestone.problem.fix}")
    if milestone.outcome is lifecycle.Outcome.DELETED:
        if podspec.recorded_delete(thread.workload.audit) is not None:
            return None
        text = "Deleted outside gpubot (by someone with cluster access); its GPU is back in the pool."
        return notices.Reply(text, mention=owner)
    if milestone.outcome is not None:
        return notices.Reply(sentence(milestone.text), mention=owner)
    if milestone.step is Step.RUNNING and not milestone.late and thread.progress.outcome is None:
        # Not once it has ended too: the ending's own mention says it, and "Running" would be untrue.
        waited = notices.format_elapsed(milestone.at - thread.progress.created)
        where = f" on {thread.progress.node}" if thread.progress.node else ""
        return notices.Reply(f"Running{where}, {waited} after the request.", mention=owner)
    return None


# -- /gpu status --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolCapacity:
    """A pool's nodes and GPUs now, as the cluster shows them, for `/gpu status` and the App Home; what its
    cloud reports of it (and what is wrong with it) is `pools.PoolView`."""

    name: str
    ready: int
    provisioning: int
    gpus_free: int
    gpus_used: int
    min_size: int | None = None
    max_size: int | None = None
    price_per_hour: float | None = None
    """The matching profile's price of one node-hour; None when no profile matches the pool's nodes."""

    @property
    def nodes_up(self) -> int:
        """Nodes the cloud bills for: Ready ones and those still provisioning."""
        return self.ready + self.provisioning


def holds_gpu(workload: workloads.Workload) -> bool:
    return workload.phase not in lifecycle.FINISHED_PHASES


def pool_price(members: Iterable[lifecycle.NodeSeen], profiles: Iterable[models.GpuProfile]) -> float | None:
    """The price of the first node whose labels match a priced profile, as the scale channel prices."""
    profiles = tuple(profiles)
    prices = (episodes.pool_price(node.labels, profiles) for node in members)
    return next((price for price in prices if price is not None), None)


def pool_views(
    nodes: Iterable[lifecycle.NodeSeen],
    held: Iterable[workloads.Workload],
    sizes: Mapping[str, tuple[int, int]],
    *,
    profiles: Iterable[models.GpuProfile] = (),
) -> list[PoolCapacity]:
    """GPU pools: those the autoscaler scales, and any pool with allocatable GPUs."""
    nodes, held, profiles = list(nodes), [w for w in held if holds_gpu(w) and w.node], tuple(profiles)
    names = set(sizes) | {n.pool for n in nodes if n.gpus > 0 and n.pool}
    views = []
    for name in sorted(names):
        members = [n for n in nodes if n.pool == name]
        ready = [n for n in members if n.ready and n.gpus > 0]
        on_members = {n.name for n in members}
        used = sum(w.gpus for w in held if w.node in on_members)
        low, high = sizes.get(name, (None, None))
        views.append(
            PoolCapacity(
                name=name,
                ready=len(ready),
                provisioning=len(members) - len(ready),
                gpus_free=max(sum(n.gpus for n in ready) - used, 0),
                gpus_used=used,
                min_size=low,
                max_size=high,
                price_per_hour=pool_price(members, profiles),
            )
        )
    return views


def free_gpus(
    nodes: Iterable[lifecycle.NodeSeen],
    held: Iterable[workloads.Workload],
    profiles: Iterable[models.GpuProfile],
) -> dict[str, int]:
    """Per profile, the GPUs free now on Ready nodes its pods may land on (its node selector)."""
    nodes, held = list(nodes), [w for w in held if holds_gpu(w) and w.node]
    used: dict[str, int] = {}
    for workload in held:
        used[workload.node] = used.get(workload.node, 0) + workload.gpus
    free = {}
    for profile in profiles:
        wanted = profile.node_selector_map.items()
        fits = [n for n in nodes if n.ready and n.gpus > 0 and wanted <= n.labels.items()]
        free[profile.name] = sum(max(n.gpus - used.get(n.name, 0), 0) for n in fits)
    return free


def workload_line(
    workload: workloads.Workload,
    now: datetime,
    *,
    with_owner: bool,
    idle_window: timedelta = IDLE_WINDOW,
) -> str:
    since = workload.created_at or workload.requested_at
    age = notices.format_elapsed(now - since) if since else "?"
    where = f"on {workload.node}" if workload.node else "no node yet"
    if workload.held_by_kueue:
        where = f"waiting for quota in Kueue queue {workload.queue}"
    phase = "Terminating" if workload.deletion_requested else workload.phase
    lease = (
        f"lease {notices.format_elapsed(workload.lease_end - now)} left" if workload.lease_end else "no lease"
    )
    owner = f" · {workload.requester_name or workload.owner_id}" if with_owner else ""
    gpus = notices.format_gpus(workload.gpus, workload.profile)
    line = f"• `{workload.name}` — {phase}, {where} · age {age} · {lease} · {gpus}{owner}"
    return line + idle_note(workload, now, idle_window)


def idle_note(workload: workloads.Workload, now: datetime, idle_window: timedelta) -> str:
    """Once the reaper has warned that it is idle: on what evidence, so a notebook's owner sees that their
    kernels were looked at too."""
    warned = workload.marks.idle_warned_at
    if warned is None or workload.deletion_requested:
        return ""
    verdict = notebooks.from_mark(workload.marks.idle_evidence)
    return f" · idle: {notebooks.evidence_text(verdict, idle_window + (now - warned))}"


def cost_text(view: PoolCapacity) -> str:
    """What the pool costs right now; a pool at zero costs nothing, an unknown price says nothing."""
    if view.nodes_up == 0:
        return "$0/h now"
    if view.price_per_hour is None:
        return ""
    return f"≈ {notices.format_cost(view.nodes_up * view.price_per_hour)}/h now"


def pool_line(view: PoolCapacity) -> str:
    size = f" · size {view.min_size} to {view.max_size}" if view.max_size is not None else ""
    cost = cost_text(view)
    return (
        f"• {view.name}: {view.ready} node(s) ready, {view.provisioning} provisioning · "
        f"GPUs {view.gpus_free} free, {view.gpus_used} used{size}{f' · {cost}' if cost else ''}"
    )


def status_report(
    mine: list[workloads.Workload],
    pools: list[PoolCapacity],
    *,
    pending_gpus: int,
    queued_gpus: int = 0,
    everyone: bool,
    now: datetime,
    spent_today: float | None = None,
    spend_unknown: bool = False,
    warm_lines: Iterable[str] = (),
    idle_window: timedelta = IDLE_WINDOW,
) -> notices.Ephemeral:
    """`spent_today`: what the caller's finished runs cost today (UTC), when a store keeps it;
    `spend_unknown` when it keeps it but cannot be read now."""
    title = "*All gpubot workloads*" if everyone else "*Your workloads*"
    lines = [title]
    lines += [workload_line(w, now, with_owner=everyone, idle_window=idle_window) for w in mine] or [
        "none — start one with `/gpu run IMAGE`"
    ]
    lines.append("*GPU pools*")
    lines += [pool_line(view) for view in pools] or ["no GPU pool found"]
    lines.append(f"GPUs pending (waiting for a node): {pending_gpus}")
    if queued_gpus:
        lines.append(f"GPUs waiting for Kueue quota (not for a node): {queued_gpus}")
    warm = list(warm_lines)
    if warm:
        lines += ["*Warm schedules* (nodes kept up at set hours, used or not)", *warm]
    if spend_unknown:
        lines.append("Your finished runs today (UTC): unknown for now, as gpubot's Redis is unreachable")
    elif spent_today is not None:
        lines.append(f"Your finished runs today (UTC): {notices.format_cost(spent_today)}")
    return notices.Ephemeral("\n".join(lines))
