"""Core: each pool's scale episodes (first node asked for, back at zero), as a pure state machine.

A channel gets one message per episode, edited as it goes, so the state has to say which episode an
observation belongs to no matter the order the event and node watches deliver it in: a node may be seen
before the event that asked for it, a node's removal before the autoscaler's event that dates it. Times
are the cluster's own (event and condition timestamps), so a message tells when things happened.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from bot.core import lifecycle, models, notices, workloads

MAX_SIZE_REACHED = "max node group size reached"  # cluster-autoscaler skippedreasons.go
IN_BACKOFF = "in backoff after failed scale-up"  # cluster-autoscaler skippedreasons.go
NODES_REMOVED = "nodes removed by cluster autoscaler"  # cluster-autoscaler delete_in_batch.go
TIMED_OUT = re.compile(r"Nodes added to group (?P<group>\S+) failed to register within (?P<took>\S+)")
GROUP_FAILED = re.compile(r"Scale-up failed for group (?P<group>\S+): (?P<detail>.+)")
GKE_FAILED = re.compile(r"failed: (?P<detail>.+?)\.(?: Pod is at risk|$)")
FAILURES = frozenset({"timed_out", "backoff", "failed"})
"""Warnings that end an attempt; a slow-provisioning warning for the same attempt then says nothing new."""
PROVISION_TIMEOUT = timedelta(minutes=15)
"""Cluster Autoscaler's --max-node-provision-time: past it a node that has not joined is overdue."""


# -- observations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolEvent:
    """An Event with the object it is about, and for a pod the owner's name when the caller knows it."""

    seen: lifecycle.EventSeen
    subject: workloads.EventSubject
    owner: str = ""

    @property
    def who(self) -> str:
        """ "alice's gpu-alice-1a2b3c", or just the pod's name when its owner is unknown."""
        return f"{self.owner}'s {self.subject.name}" if self.owner else self.subject.name


@dataclass(frozen=True)
class NodeRemoved:
    at: datetime
    name: str
    pool: str


@dataclass(frozen=True)
class Seeded:
    """The nodes already there when gpubot starts; pools with GPUs up get a resumed episode."""

    at: datetime
    nodes: tuple[lifecycle.NodeSeen, ...]


Observation = lifecycle.NodeSeen | NodeRemoved | PoolEvent | Seeded


# -- state -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trigger:
    """One pod's TriggeredScaleUp: whose workload asked, and the size change the autoscaler chose."""

    at: datetime
    namespace: str
    workload: str
    who: str
    """Whose workload, as `PoolEvent.who` says it."""
    old: int
    new: int
    max_size: int
    attempt: int = 0

    @property
    def identity(self) -> tuple[str, str, int, int, int]:
        """What a repeat of the same event shares: not when it was seen, whose it is, nor the max size."""
        return (self.namespace, self.workload, self.old, self.new, self.attempt)


@dataclass(frozen=True)
class NodeRecord:
    name: str
    registered_at: datetime
    ready_at: datetime | None = None
    removed_at: datetime | None = None
    scale_down_at: datetime | None = None
    """When the autoscaler said it removed the node; dates a removal the node watch saw late."""
    gpus: int = 0
    """The most GPUs the node ever had allocatable."""
    seeded: bool = False
    """Already there when gpubot started: its earlier steps belong to the previous message."""

    def hours(self, now: datetime) -> float:
        end = self.removed_at or now
        return max((end - self.registered_at).total_seconds(), 0.0) / 3600


@dataclass(frozen=True)
class ScaleWarning:
    at: datetime
    kind: str
    """`max_size`, `overdue`, `timed_out`, `backoff` or `failed`; one of each kind per subject."""
    subject: str
    text: str = ""
    """Said as is; empty for `max_size`, which is worded at render time for all the pods it holds up."""
    who: str = ""
    over_at: datetime | None = None
    """For `max_size`: when the pod it held up was scheduled after all (a GPU freed up)."""


@dataclass(frozen=True)
class Episode:
    pool: str
    opened_at: datetime
    """When gpubot opened it; never moves, so it names the episode (and its message) across edits."""
    started_at: datetime
    """The earliest moment known to belong to it; moves earlier when a late event dates the start."""
    triggers: tuple[Trigger, ...] = ()
    nodes: tuple[NodeRecord, ...] = ()
    warnings: tuple[ScaleWarning, ...] = ()
    closed_at: datetime | None = None
    resumed: bool = False
    """Opened by a restart with nodes up, rather than seen from its start."""
    attempt: int = 0
    """Failed scale-ups so far; a retry of the same pod after one is a new trigger."""

    @property
    def key(self) -> str:
        """Identifies the episode, and so its one channel message, across edits."""
        return f"{self.pool}@{self.opened_at.isoformat()}"

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    def node(self, name: str) -> NodeRecord | None:
        return next((n for n in self.nodes if n.name == name), None)

    def gpu_hours(self, now: datetime) -> float:
        return sum(n.hours(self.closed_at or now) * n.gpus for n in self.nodes)

    def node_hours(self, now: datetime) -> float:
        return sum(n.hours(self.closed_at or now) for n in self.nodes)


@dataclass(frozen=True)
class PoolState:
    present: frozenset[str] = frozenset()
    """Names of the pool's nodes that exist now, in or out of an episode."""
    episode: Episode | None = None
    """The open episode, or the last closed one (kept so late observations find where they belong)."""
    seeded: bool = False
    quiet_since: datetime | None = None
    """When the episode before the current one closed: scale-up events up to then are leftovers."""


@dataclass(frozen=True)
class Scales:
    since: datetime
    """Events before this moment are history (the informer's initial list) and start nothing."""
    pools: Mapping[str, PoolState] = field(default_factory=dict)
    provision_timeout: timedelta = PROVISION_TIMEOUT

    def pool(self, name: str) -> PoolState:
        return self.pools.get(name, PoolState())

    def open_episodes(self) -> list[Episode]:
        return [p.episode for p in self.pools.values() if p.episode is not None and not p.episode.closed]


def start(since: datetime, *, provision_timeout: timedelta = PROVISION_TIMEOUT) -> Scales:
    return Scales(since=since.replace(microsecond=0), provision_timeout=provision_timeout)


# -- transitions -------------------------------------------------------------------------------------


def advance(state: Scales, seen: Observation) -> tuple[Scales, bool]:
    """Fold one observation in; `changed` says whether any episode (so any message) changed."""
    if isinstance(seen, Seeded):
        new = _on_seeded(state, seen)
    elif isinstance(seen, lifecycle.NodeSeen):
        new = _on_node(_expire(state, seen.at), seen)
    elif isinstance(seen, NodeRemoved):
        new = _on_removed(state, seen)
    elif seen.seen.at < state.since:
        new = state
    else:
        new = _on_event(_expire(state, seen.seen.at), seen)
    return new, new != state


def _with_pool(state: Scales, name: str, pool: PoolState) -> Scales:
    return replace(state, pools={**state.pools, name: pool})


def _with_episode(state: Scales, episode: Episode) -> Scales:
    """Store the pool's episode; one replacing a closed episode makes that episode's end the quiet mark."""
    pool = state.pool(episode.pool)
    last = pool.episode
    if last is not None and last.key != episode.key and last.closed_at is not None:
        pool = replace(pool, quiet_since=last.closed_at)
    return _with_pool(state, episode.pool, replace(pool, episode=episode))


def _open(state: Scales, pool: str) -> Episode | None:
    episode = state.pool(pool).episode
    return episode if episode is not None and not episode.closed else None


def _put_node(episode: Episode, record: NodeRecord) -> Episode:
    others = tuple(n for n in episode.nodes if n.name != record.name)
    nodes = tuple(sorted((*others, record), key=lambda n: (n.registered_at, n.name)))
    return replace(episode, nodes=nodes)


def _warn(episode: Episode, warning: ScaleWarning) -> Episode:
    if any((w.kind, w.subject) == (warning.kind, warning.subject) for w in episode.warnings):
        return episode
    return replace(episode, warnings=(*episode.warnings, warning))


def _on_seeded(state: Scales, seen: Seeded) -> Scales:
    state = replace(state, since=max(state.since, seen.at.replace(microsecond=0)))
    for node in seen.nodes:
        if not node.pool:
            continue
        pool = state.pool(node.pool)
        state = _with_pool(state, node.pool, replace(pool, present=pool.present | {node.name}, seeded=True))
    for node in seen.nodes:
        state = _resume_if_gpu(state, node, at=seen.at)
    return state


def _resume_if_gpu(state: Scales, node: lifecycle.NodeSeen, *, at: datetime) -> Scales:
    """A pool that was up before gpubot started gets a resumed episode once a node shows GPUs."""
    pool = state.pool(node.pool)
    if not pool.seeded or pool.episode is not None or node.gpus <= 0:
        return state
    records = tuple(
        NodeRecord(
            name, registered_at=at, ready_at=at, gpus=node.gpus if name == node.name else 0, seeded=True
        )
        for name in sorted(pool.present)
    )
    return _with_episode(state, Episode(node.pool, opened_at=at, started_at=at, nodes=records, resumed=True))


def _on_node(state: Scales, seen: lifecycle.NodeSeen) -> Scales:
    if not seen.pool:
        return state
    pool = state.pool(seen.pool)
    episode = _open(state, seen.pool)
    if seen.name not in pool.present:
        state = _with_pool(state, seen.pool, replace(pool, present=pool.present | {seen.name}))
        if episode is None and not pool.present and seen.at >= state.since:
            episode = Episode(seen.pool, opened_at=seen.at, started_at=seen.at)
        if episode is not None:
            episode = _put_node(episode, NodeRecord(seen.name, registered_at=seen.at))
    elif episode is None:
        return _resume_if_gpu(state, seen, at=seen.at)
    record = episode.node(seen.name) if episode is not None else None
    if episode is None or record is None:
        return state
    updated = replace(
        record,
        ready_at=record.ready_at or (seen.at if seen.ready else None),
        gpus=max(record.gpus, seen.gpus),
    )
    return _with_episode(state, _put_node(episode, updated))


def _on_removed(state: Scales, seen: NodeRemoved) -> Scales:
    pool = state.pool(seen.pool)
    if seen.name not in pool.present:
        return state
    left = pool.present - {seen.name}
    state = _with_pool(state, seen.pool, replace(pool, present=left))
    episode = _open(state, seen.pool)
    record = episode.node(seen.name) if episode is not None else None
    if episode is None:
        return state
    if record is not None:
        at = min(seen.at, record.scale_down_at) if record.scale_down_at else seen.at
        episode = _put_node(episode, replace(record, removed_at=max(at, record.registered_at)))
    if not left:
        episode = replace(episode, closed_at=_last_removal(episode, seen.at))
    return _with_episode(state, episode)


def _last_removal(episode: Episode, fallback: datetime) -> datetime:
    return max((n.removed_at for n in episode.nodes if n.removed_at), default=fallback)


def _on_event(state: Scales, seen: PoolEvent) -> Scales:
    reason, message = seen.seen.reason, seen.seen.message
    if reason == "TriggeredScaleUp" and seen.subject.kind == "Pod":
        return _on_triggered(state, seen)
    if reason == "NotTriggerScaleUp" and MAX_SIZE_REACHED in message:
        return _warn_max_size(state, seen)
    if reason == "Scheduled" and seen.subject.kind == "Pod":
        return _on_scheduled(state, seen)
    if reason == "NotTriggerScaleUp" and IN_BACKOFF in message:
        backoff = "; the autoscaler backs off (up to 30m) before it retries"
        episode = _episode_of_pod(state, seen.subject)
        return _close_if_empty(_warn_failed(state, episode, seen, "backoff", backoff), seen)
    if reason == "FailedScaleUp":
        detail = match["detail"] if (match := GKE_FAILED.search(message)) else message
        return _warn_failed(state, _episode_of_pod(state, seen.subject), seen, "failed", f": {detail}")
    if reason == "ScaleUpTimedOut" and (match := TIMED_OUT.search(message)):
        return _on_timed_out(state, seen, lifecycle.pool_name(match["group"]), match["took"])
    if reason == "FailedToScaleUpGroup" and (match := GROUP_FAILED.search(message)):
        episode = _open(state, lifecycle.pool_name(match["group"]))
        return _warn_failed(state, episode, seen, "failed", f": {match['detail']}")
    if reason == "ScaleDown" and seen.subject.kind == "Node" and message == NODES_REMOVED:
        return _on_scale_down(state, seen.subject.name, seen.seen.at)
    return state


def _on_triggered(state: Scales, seen: PoolEvent) -> Scales:
    for match in lifecycle.SCALE_UP_INFO.finditer(seen.seen.message):
        pool = lifecycle.pool_name(match["group"])
        episode = _episode_for_trigger(state, pool, seen.seen.at)
        if episode is None:
            continue
        trigger = Trigger(
            at=seen.seen.at,
            namespace=seen.subject.namespace,
            workload=seen.subject.name,
            who=seen.who,
            old=int(match["old"]),
            new=int(match["new"]),
            max_size=int(match["max"]),
            attempt=episode.attempt,
        )
        if any(t.identity == trigger.identity for t in episode.triggers):
            continue  # the same event again: a MODIFIED repeat, or a relist
        started = min(episode.started_at, trigger.at)
        state = _with_episode(
            state, replace(episode, started_at=started, triggers=(*episode.triggers, trigger))
        )
    return state


def _episode_for_trigger(state: Scales, pool: str, at: datetime) -> Episode | None:
    """The open episode, the closed one a late event belongs to, or a new one; None for an older event."""
    pool_state = state.pool(pool)
    last = pool_state.episode
    if pool_state.quiet_since is not None and at <= pool_state.quiet_since:
        return None
    if last is None or last.closed_at is None or at > last.closed_at:
        return last if last is not None and not last.closed else Episode(pool, opened_at=at, started_at=at)
    # Before the last episode closed: its own trigger if it came in its span (or, for an episode a node
    # opened, within the provisioning time before it); else a leftover of some earlier episode.
    earliest = last.started_at - (state.provision_timeout if not last.triggers else timedelta(0))
    return last if at >= earliest else None


def _episode_of_pod(state: Scales, subject: workloads.EventSubject) -> Episode | None:
    """The open episode the pod triggered, else the only open one; None when it cannot be told (or the
    event is not about a pod)."""
    if subject.kind != "Pod":
        return None
    opened = state.open_episodes()
    mine = [
        e
        for e in opened
        if any((t.namespace, t.workload) == (subject.namespace, subject.name) for t in e.triggers)
    ]
    if mine:
        return mine[0]
    return opened[0] if len(opened) == 1 else None


def _warn_failed(state: Scales, episode: Episode | None, seen: PoolEvent, kind: str, words: str) -> Scales:
    """Warn that the episode's current scale-up attempt failed (`words` say how, after "failed"); nothing
    when the event belongs to no open episode."""
    if episode is None:
        return state
    text = f"scale-up of {episode.pool} failed{words}"
    return _with_episode(state, _warn(episode, ScaleWarning(seen.seen.at, kind, str(episode.attempt), text)))


def _warn_max_size(state: Scales, seen: PoolEvent) -> Scales:
    episode = _episode_of_pod(state, seen.subject)
    if episode is None:
        return state
    subject = f"{seen.subject.namespace}/{seen.subject.name}"
    return _with_episode(state, _warn(episode, ScaleWarning(seen.seen.at, "max_size", subject, who=seen.who)))


def _on_scheduled(state: Scales, seen: PoolEvent) -> Scales:
    """A pod the max size held up got a GPU after all: its warning is over, and says how long after."""
    subject = f"{seen.subject.namespace}/{seen.subject.name}"
    for episode in state.open_episodes():
        held = [
            w for w in episode.warnings if w.kind == "max_size" and w.subject == subject and not w.over_at
        ]
        if held:
            warnings = tuple(replace(w, over_at=seen.seen.at) if w in held else w for w in episode.warnings)
            state = _with_episode(state, replace(episode, warnings=warnings))
    return state


def _close_if_empty(state: Scales, seen: PoolEvent) -> Scales:
    """A scale-up that failed into back-off and left the pool with no node ends the episode; a retry
    opens a new one."""
    for episode in state.open_episodes():
        failed = any(w.kind == "backoff" and w.subject == str(episode.attempt) for w in episode.warnings)
        if failed and not state.pool(episode.pool).present:
            state = _with_episode(
                state, replace(episode, closed_at=seen.seen.at, attempt=episode.attempt + 1)
            )
    return state


def _on_timed_out(state: Scales, seen: PoolEvent, pool: str, took: str) -> Scales:
    episode = _open(state, pool)
    if episode is None:
        return state
    text = (
        f"provisioning timed out: no node joined {pool} within {took}; the autoscaler backs off and retries"
    )
    episode = _warn(episode, ScaleWarning(seen.seen.at, "timed_out", str(episode.attempt), text))
    if not state.pool(pool).present:
        episode = replace(episode, closed_at=seen.seen.at)
    return _with_episode(state, replace(episode, attempt=episode.attempt + 1))


def _on_scale_down(state: Scales, node: str, at: datetime) -> Scales:
    """Date the node's removal by the autoscaler's event, also when the node watch saw it go first."""
    for pool in state.pools.values():
        episode = pool.episode
        record = episode.node(node) if episode is not None else None
        if episode is None or record is None:
            continue
        record = replace(record, scale_down_at=at)
        if record.removed_at is not None and at < record.removed_at:
            record = replace(record, removed_at=max(at, record.registered_at))
        episode = _put_node(episode, record)
        if episode.closed:
            episode = replace(episode, closed_at=_last_removal(episode, at))
        return _with_episode(state, episode)
    return state


def _expire(state: Scales, now: datetime) -> Scales:
    """Any observation is a clock tick: warn about scale-ups whose node is overdue."""
    for episode in state.open_episodes():
        last = max(episode.triggers, key=lambda t: t.at, default=None)
        if last is None or now - last.at < state.provision_timeout:
            continue
        if any(n.registered_at >= last.at for n in episode.nodes):
            continue
        took = notices.format_elapsed(state.provision_timeout)
        text = f"provisioning is slow: no node has joined {episode.pool} {took} after the scale-up"
        state = _with_episode(state, _warn(episode, ScaleWarning(now, "overdue", str(last.attempt), text)))
    return state


# -- pricing -----------------------------------------------------------------------------------------


def selects(profile: models.GpuProfile, node_labels: Mapping[str, str]) -> bool:
    """The profile's node selector matches a node with these labels (a profile with none matches none)."""
    selector = profile.node_selector_map
    return bool(selector) and all(node_labels.get(k) == v for k, v in selector.items())


def pool_price(node_labels: Mapping[str, str], profiles: Iterable[models.GpuProfile]) -> float | None:
    """Price per node-hour of the profile whose node selector the pool's nodes match; None if none does."""
    for profile in sorted(profiles, key=lambda p: p.name):
        if profile.price_per_hour > 0 and selects(profile, node_labels):
            return profile.price_per_hour
    return None


# -- the notice --------------------------------------------------------------------------------------


def to_notice(episode: Episode, *, now: datetime, price_per_hour: float | None) -> notices.ChannelEpisode:
    """The channel message for the episode as it stands: a headline, dated lines (the last, once closed,
    with the cost), warnings."""
    return notices.ChannelEpisode(
        pool=episode.pool,
        headline=_headline(episode),
        lines=tuple(text for _, text in sorted(_lines(episode, now, price_per_hour), key=lambda p: p[0])),
        warning="; ".join(_warning_texts(episode)),
        closed=episode.closed,
    )


def _headline(episode: Episode) -> str:
    if episode.closed:
        return "back at 0 nodes" if episode.nodes else "scale-up ended with no node"
    up = [n for n in episode.nodes if n.removed_at is None]
    ready = sum(1 for n in up if n.ready_at is not None)
    if any(n.removed_at for n in episode.nodes):
        return f"scaling down: {len(up)} node{'' if len(up) == 1 else 's'} left"
    if ready:
        joining = len(up) - ready
        return f"{ready} node{'' if ready == 1 else 's'} Ready" + (f", {joining} joining" if joining else "")
    target = max((t.new for t in episode.triggers), default=0)
    if up:
        return f"scaling up: {len(up)} node{'' if len(up) == 1 else 's'} joining, not Ready yet"
    return f"scaling up to {target}: waiting for a node" if target else "scaling up: waiting for a node"


def _asked_at(episode: Episode, node: NodeRecord) -> datetime:
    """When the node was asked for: the latest scale-up before it joined, else when it joined."""
    earlier = [t.at for t in episode.triggers if t.at <= node.registered_at]
    return max(earlier, default=node.registered_at)


def _lines(episode: Episode, now: datetime, price: float | None) -> list[tuple[datetime, str]]:
    out: list[tuple[datetime, str]] = []
    if episode.resumed:
        up = len(episode.nodes)
        out.append(
            (episode.started_at, f"resumed after a gpubot restart with {up} node{'' if up == 1 else 's'} up")
        )
    for trigger in sorted(episode.triggers, key=lambda t: t.at):
        out.append(
            (trigger.at, f"scale-up triggered for {trigger.who} ({episode.pool} {trigger.old}→{trigger.new})")
        )
    for node in episode.nodes:
        out += _node_lines(episode, node)
    if episode.closed_at is not None and episode.nodes:
        out.append((episode.closed_at, _closing_line(episode, now, price)))
    return out


def _node_lines(episode: Episode, node: NodeRecord) -> list[tuple[datetime, str]]:
    out: list[tuple[datetime, str]] = []
    asked = _asked_at(episode, node)
    if not node.seeded:
        joined = notices.format_elapsed(node.registered_at - asked)
        after = f" after {joined}" if asked < node.registered_at else ""
        out.append((node.registered_at, f"node {node.name} joined{after}"))
        if node.ready_at is not None:
            ready = notices.format_elapsed(node.ready_at - asked)
            out.append((node.ready_at, f"node {node.name} Ready after {ready}"))
    if node.removed_at is not None:
        out.append((node.removed_at, f"scale-down: node {node.name} removed"))
    return out


def _closing_line(episode: Episode, now: datetime, price: float | None) -> str:
    assert episode.closed_at is not None
    took = notices.format_elapsed(episode.closed_at - episode.started_at)
    gpu_hours = episode.gpu_hours(now)
    cost = (
        f"≈ {notices.format_cost(episode.node_hours(now) * price)}"
        if price is not None
        else "cost unknown (no profile prices this pool)"
    )
    since = " since the restart" if episode.resumed else ""
    return f"pool at 0 — episode {took}{since}, {gpu_hours:.2f} GPU-hours, {cost}"


def _warning_texts(episode: Episode) -> list[str]:
    """Each warning once, oldest first; the pods held up by the max size share one sentence."""
    waiting = [w for w in episode.warnings if w.kind == "max_size"]
    failed = {w.subject for w in episode.warnings if w.kind in FAILURES}
    dated = [
        (w.at, w.text)
        for w in episode.warnings
        if w.kind != "max_size" and not (w.kind == "overdue" and w.subject in failed)
    ]
    if waiting:
        dated.append((waiting[0].at, _max_size_text(episode, waiting)))
    return [text for _, text in sorted(dated, key=lambda p: p[0])]


def _max_size_text(episode: Episode, held: list[ScaleWarning]) -> str:
    """Who waits now; once none does (each got a GPU, or the episode is over), a dated line in the past
    tense, so the message never says someone waits who no longer does."""
    limit = max((t.max_size for t in episode.triggers), default=0)
    size = f" of {limit} node{'' if limit == 1 else 's'}" if limit else ""
    waiting = [w.who for w in held if w.over_at is None]
    got = [(w.who, notices.format_elapsed(w.over_at - w.at)) for w in held if w.over_at is not None]
    if waiting and not episode.closed:
        verb = "waits" if len(waiting) == 1 else "wait"
        parts = [f"{', '.join(waiting)} {verb} for a GPU to free up"]
        parts += [f"{who} got one {took} later" for who, took in got]
        return f"max size reached: {episode.pool} is at its maximum{size}; " + "; ".join(parts)
    parts = [f"{who} got a GPU {took} later" for who, took in got]
    parts += [f"{who} waited for a GPU" for who in waiting]
    return (
        f"max size reached at {notices.clock_time(held[0].at)}: {episode.pool} was at its maximum{size}; "
        + ("; ".join(parts))
    )
