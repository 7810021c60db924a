"""Services: the informer callbacks that turn pod, event and node changes into each workload's live thread.

One `Progress` per workload key, fed in whatever order the three informers deliver. Everything is rebuilt
from the informers' initial lists, so a restarted bot resumes its threads: until `go_live()` the tracker
only learns (no chat writes), then it re-renders every status message once, and from there on each new
milestone edits the status message and the key moments also get a short reply.

With several replicas every one learns, and only the leader speaks: `go_live` when it gains the lease,
`pause` when it loses it. A new leader also redraws the threads whose pod went in the last minutes: the
old leader's final edits of them may have died in its outbox, and no pod is left to rebuild them from.
`tick` (a timer) notices what no watch reports: a node that is late, and a wait whose autoscaler verdict
never came. What the pool does after a workload is gone (its drain to zero) is the scale channel's to say.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bot.core import (
    cluster_nodes,
    costs,
    errors,
    explain,
    lifecycle,
    notices,
    podspec,
    ports,
    provisioning,
    queue,
    reaping,
    reminders,
    status,
    usage,
    workloads,
)
from bot.services.kueue_line import KueueLine

logger = logging.getLogger(__name__)

MAX_ORPHAN_PODS = 500
MAX_ORPHAN_EVENTS = 50
"""Events that arrive before their pod are kept this long (pods, events each), then the oldest go."""
NODE_CREATION_SLACK = timedelta(seconds=5)
"""A node counts as this workload's new node only if it appeared after (about) the scale-up it triggered."""
ENDED_REDRAWN = timedelta(minutes=15)
"""Threads whose pod is gone are redrawn by a new leader this long after: longer than a backed-up
outbox takes to send a thread's last edit (chat.update is paced at 50 a minute)."""


FAILURE_LINES = 20
"""The last lines of a failed run's output shown in its thread; `/gpu logs` shows more."""


class ReadLog(Protocol):
    def __call__(self, namespace: str, name: str, *, tail_lines: int) -> str: ...


def full_stop(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else f"{text}."


def wall_clock() -> datetime:
    return datetime.now(UTC)


class Tracker:
    def __init__(
        self,
        chat_port: ports.Chat,
        *,
        clock: Callable[[], datetime],
        store: ports.Store,
        prices: Mapping[str, float],
        telemetry: ports.Telemetry,
        read_log: ReadLog,
        policy: reaping.ReaperPolicy,
        find_url: Callable[[workloads.Workload], None],
        kueue_line: KueueLine | None,
    ) -> None:
        """`store` keeps each pool's past scale-up durations, for the ETA and the slow-node warning;
        `read_log` gives a failed run's last lines for the reply that says it failed; `find_url` starts
        looking in a running workload's output for what to open (`url_found` gets the answer);
        `kueue_line` tells the admission and places of runs whose profile has a Kueue `queue:`."""
        self._kueue = kueue_line
        if kueue_line is not None:
            kueue_line.listen(self.on_kueue)
        self._telemetry = telemetry
        self._read_log = read_log
        self._find_url = find_url
        self._policy = policy
        """The reaper's timings: when a holder's GPUs come back, for the line's ETA."""
        self._chat = chat_port
        self._clock = clock
        self._store = store
        self._prices = dict(prices)
        """Profile name → price per node-hour, for what a finished run cost."""
        self._history: dict[str, provisioning.Usual | None] = {}
        self._learned: set[str] = set()
        """Workloads whose scale-up duration is recorded already."""
        self._lock = threading.RLock()
        self._threads: dict[str, status.Thread] = {}
        self._ended: dict[str, tuple[datetime, status.Thread]] = {}
        """Threads whose pod is gone, with when: a new leader redraws them (see ENDED_REDRAWN)."""
        self._shown: dict[str, notices.ThreadStatus] = {}
        self._orphans: collections.OrderedDict[str, list[lifecycle.EventSeen]] = collections.OrderedDict()
        self._nodes: dict[str, lifecycle.NodeSeen] = {}
        self._cluster_now: datetime | None = None
        self._live = False

    # -- reading ---------------------------------------------------------------------------------
    def threads(self) -> dict[str, status.Thread]:
        with self._lock:
            return dict(self._threads)

    def start_error(self, key: str) -> str:
        """The newest kubelet failure message about starting a workload (`namespace/name`), if any."""
        with self._lock:
            thread = self._threads.get(key)
            return thread.progress.start_error if thread is not None else ""

    def workload(self, namespace: str, name: str) -> workloads.Workload | None:
        """A tracked workload as the pod informer last delivered it; None if not (yet) seen."""
        with self._lock:
            thread = self._threads.get(f"{namespace}/{name}")
            return thread.workload if thread is not None else None

    def held_runs(self) -> list[usage.Held]:
        """Runs on a node now and not over, as the pods say, each with its price: what spend counts live
        until the run ends and its cost is settled into the store."""
        with self._lock:
            holding = [t for t in self._threads.values() if status.holds_gpus(t)]
            return [self._held(t, since) for t in holding if (since := t.progress.held_since) is not None]

    def names(self) -> dict[str, str]:
        """Slack user name (lower case) → id, of the owners of the pods seen."""
        with self._lock:
            found = [t.workload for t in self._threads.values() if t.workload.requester_name]
        return {w.requester_name.lower(): w.owner_id for w in found}

    def waiting_in_line(self) -> dict[str, int]:
        """Profile → workloads waiting in its pool's line now (the pool at its maximum)."""
        with self._lock:
            waiting = [t.workload.profile for t in self._threads.values() if status.in_line(t)]
        return dict(collections.Counter(waiting))

    def go_live(self) -> int:
        """After the initial lists: render every known thread once, then report changes as they come."""
        with self._lock:
            self._live = True
            for key, thread in self._threads.items():
                if provisioning.measured(thread.progress) is not None:
                    self._learned.add(key)  # measured before we spoke: another replica, or we, recorded it
                self._publish(key, thread, [])
            now = self._now()
            for key, (ended_at, thread) in self._ended.items():
                if now - ended_at <= ENDED_REDRAWN:
                    self._publish(key, thread, [])
            self._ended.clear()
            return len(self._threads)

    def url(self, key: str) -> str:
        """What a workload's output showed to open (a notebook's URL with its token); "" if nothing yet."""
        with self._lock:
            thread = self._threads.get(key)
            return thread.url if thread is not None else ""

    def url_found(self, key: str, url: str) -> None:
        """A running workload's URL, read from its output: its Connect section says what to open."""
        with self._lock:
            thread = self._threads.get(key)
            if thread is not None and not thread.url:
                thread = self._threads[key] = replace(thread, url=url)
                self._publish(key, thread, [])

    def pause(self) -> None:
        """Leadership lost: keep learning, stop speaking; the next `go_live` re-renders every thread."""
        with self._lock:
            self._live = False
            self._shown.clear()

    def tick(self) -> None:
        """Timer work: flag nodes far later than usual; show the waits held for a verdict that never came."""
        with self._lock:
            now = self._now()
            lines = set()
            for key, thread in list(self._threads.items()):
                problem = provisioning.slow(thread.progress, self._usual(thread.progress.pool), now)
                if problem is not None:
                    self._flag(key, thread, now, problem)
                elif status.in_line(thread):  # its ETA counts down: the line is redrawn once, below
                    lines.add(thread.workload.profile)
                else:  # a wait held for the autoscaler's verdict is shown once that is overdue
                    self._publish(key, thread, [], place="")
            for profile in lines:
                self._requeue(profile)

    # -- informer callbacks ----------------------------------------------------------------------
    def on_pod(self, change: str, pod: Mapping[str, Any]) -> None:
        workload = workloads.from_pod(pod)
        if workload is None:
            return
        with self._lock:
            seen = self._observe_pod(pod, deleted=change == ports.DELETED)
            thread = self._threads.get(workload.key)
            if thread is None or (thread.workload.uid and thread.workload.uid != workload.uid):
                thread = self._adopt(workload)
            self._apply(workload.key, replace(thread, workload=workload), [seen])
            if change == ports.DELETED:
                ended = self._threads.pop(workload.key)
                if status.in_line(ended) or status.holds_gpus(ended):
                    self._requeue(workload.profile)
                self._tell_removed(ended)
                if not self._live:  # a follower: the leader's last edit of it may never arrive
                    self._remember_ended(workload.key, ended)
                self._shown.pop(workload.key, None)
                self._learned.discard(workload.key)

    def on_event(self, change: str, event: Mapping[str, Any]) -> None:
        subject = workloads.event_subject(event)
        seen = workloads.observe_event(event)
        if change == ports.DELETED or seen is None:
            return
        with self._lock:
            self._bump(seen.at)  # any event dates the cluster's clock, a node's scale-down included
            if subject is None or subject.kind != "Pod":
                return
            key = f"{subject.namespace}/{subject.name}"
            thread = self._threads.get(key)
            if thread is None:
                self._keep_orphan(key, seen)
            elif not subject.uid or not thread.workload.uid or subject.uid == thread.workload.uid:
                self._apply(key, thread, [seen, *self._new_nodes_for(thread)])

    def on_kueue(self, key: str, seen: lifecycle.KueueSeen | None) -> None:
        """A Workload changed (`key` its pod's, if gpubot's): its thread learns, and the Kueue lines move."""
        with self._lock:
            thread = self._threads.get(key)
            if thread is not None and seen is not None:
                self._apply(key, thread, [seen])
            for profile in {t.workload.profile for t in self._threads.values() if t.workload.queue}:
                self._requeue(profile)

    def on_node(self, change: str, node: Mapping[str, Any]) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        with self._lock:
            if change == ports.DELETED:
                self._bump(cluster_nodes.last_seen(node) or self._now())
                self._nodes.pop(name, None)
                return
            at = max(filter(None, (cluster_nodes.last_seen(node), self._cluster_now)), default=self._clock())
            seen = self._nodes[name] = workloads.observe_node(node, at=at)
            # Only the node that changed: the others were offered when they changed, and again with
            # each event since (on_event), so offering all of them here cost threads x nodes per change.
            for key, thread in list(self._threads.items()):
                if _may_bring(thread.progress, seen):
                    self._apply(key, thread, [seen])

    # -- state -----------------------------------------------------------------------------------
    def _observe_pod(self, pod: Mapping[str, Any], *, deleted: bool) -> lifecycle.PodSeen:
        try:
            seen = workloads.observe_pod(pod, deleted=deleted)
        except ValueError:
            seen = workloads.observe_pod(pod, deleted=deleted, at=self._cluster_now or self._clock())
        self._bump(seen.at)
        return seen

    def _now(self) -> datetime:
        """The later of the cluster's latest timestamp and our clock: either may run ahead of the other."""
        return max(filter(None, (self._cluster_now, self._clock())))

    def _bump(self, moment: datetime) -> None:
        if self._cluster_now is None or moment > self._cluster_now:
            self._cluster_now = moment

    def _adopt(self, workload: workloads.Workload) -> status.Thread:
        """A workload seen for the first time (new, or after a restart): replay what arrived before it."""
        created = workload.created_at or workload.requested_at or self._cluster_now or self._clock()
        thread = status.Thread(workload=workload, progress=lifecycle.Progress(created=created))
        self._threads[workload.key] = thread
        early: list[lifecycle.Observation] = sorted(
            self._orphans.pop(workload.key, []), key=lambda seen: seen.at
        )
        kueue_seen = self._kueue.seen_for(workload.key) if self._kueue and workload.queue else None
        if kueue_seen is not None:
            early.insert(0, kueue_seen)
        self._apply(workload.key, thread, early)
        return self._threads[workload.key]

    def _remember_ended(self, key: str, thread: status.Thread) -> None:
        now = self._now()
        self._ended = {k: kept for k, kept in self._ended.items() if now - kept[0] <= ENDED_REDRAWN}
        self._ended[key] = (now, thread)

    def _keep_orphan(self, key: str, seen: lifecycle.EventSeen) -> None:
        kept = self._orphans.setdefault(key, [])
        kept.append(seen)
        del kept[:-MAX_ORPHAN_EVENTS]
        self._orphans.move_to_end(key)
        while len(self._orphans) > MAX_ORPHAN_PODS:
            self._orphans.popitem(last=False)

    def _new_nodes_for(self, thread: status.Thread) -> list[lifecycle.Observation]:
        """Nodes that may be the one this workload's scale-up brings: its pool, created after the trigger."""
        return [
            seen
            for seen in sorted(self._nodes.values(), key=lambda n: n.name)
            if _may_bring(thread.progress, seen)
        ]

    def _apply(self, key: str, thread: status.Thread, observations: list[lifecycle.Observation]) -> None:
        milestones: list[lifecycle.Milestone] = []
        for seen in observations:
            progress, new = lifecycle.advance(thread.progress, seen)
            thread = _remember(replace(thread, progress=progress), new)
            milestones += new
        self._commit(key, thread, milestones)

    def _flag(self, key: str, thread: status.Thread, at: datetime, problem: explain.Problem) -> None:
        progress, new = lifecycle.flag(thread.progress, at, problem)
        if new:
            self._commit(key, _remember(replace(thread, progress=progress), new), new)

    def _commit(self, key: str, thread: status.Thread, milestones: list[lifecycle.Milestone]) -> None:
        before = self._threads.get(key)
        self._threads[key] = thread
        for milestone in milestones:
            logger.info("workload %s: %s", key, milestone.text)
        self._learn_duration(key, thread.progress)
        self._measure(thread.progress, milestones)
        ended = next((m for m in milestones if m.outcome is not None), None)
        if ended is not None:
            thread = self._threads[key] = replace(thread, ending=self._settle_cost(thread, ended.at))
        self._publish(key, thread, milestones)
        if before is None or status.line_facts(before) != status.line_facts(thread):
            self._requeue(thread.workload.profile, changed=key)

    def _measure(self, progress: lifecycle.Progress, milestones: list[lifecycle.Milestone]) -> None:
        """Only the live (leading) replica counts, and only news: a replay after a restart is not."""
        for milestone in milestones:
            if not self._live or milestone.late:
                continue
            if milestone.step == lifecycle.Step.SCALE_UP:
                self._telemetry.count_scale_up(progress.pool)
            elif milestone.step == lifecycle.Step.RUNNING:
                self._telemetry.observe_time_to_running((milestone.at - progress.created).total_seconds())

    # -- cost ----------------------------------------------------------------------------------------
    def _held(self, thread: status.Thread, since: datetime) -> usage.Held:
        """Its GPUs from `since`, priced as its profile's share of its node (the node's GPUs as last seen)."""
        workload = thread.workload
        known = self._nodes.get(thread.progress.node or workload.node)
        node_gpus = known.gpus if known is not None else workload.gpus
        price = self._prices.get(workload.profile)
        return usage.Held(workload.owner_id, workload.channel, workload.gpus, node_gpus, since, price)

    def _settle_cost(self, thread: status.Thread, ended: datetime) -> str:
        """A run is over: what it held and cost ("" if unknown), added to its owner's spend by day and
        channel by the live (leading) replica only, so two replicas never add it twice."""
        since = thread.progress.held_since
        if since is None:
            return ""
        held = self._held(thread, since)
        cost = costs.run_cost(
            thread.progress,
            ended=ended,
            gpus=held.gpus,
            node_gpus=held.node_gpus,
            price_per_node_hour=held.price_per_node_hour,
        )
        if cost is None:
            return ""
        workload = thread.workload
        if self._live:
            spent = usage.finished_amounts(
                held.user,
                held.channel,
                start=since,
                end=ended,
                gpu_hours=cost.gpu_hours,
                dollars=cost.dollars,
            )
            for table, amounts in spent.items():
                self._store.add_amounts(table, amounts, usage.RETENTION_SECONDS)
            if workload.requester_name:
                self._store.put(usage.NAMES_TABLE, workload.requester_name.lower(), workload.owner_id)
        return costs.cost_text(cost)

    def _tell_removed(self, thread: status.Thread) -> None:
        """A finished pod went with no release or reap recorded on it (nor one being told): say who did."""
        workload = thread.workload
        if (
            not self._live
            or workload.phase not in lifecycle.FINISHED_PHASES
            or podspec.delete_recorded(workload.audit)
            or workload.marks.telling_since is not None
            or not (workload.channel and workload.thread_ts)
        ):
            return
        self._chat.reply(
            workload.channel, workload.thread_ts, notices.Reply(reminders.removed_outside(workload))
        )

    # -- history -------------------------------------------------------------------------------------
    def _usual(self, pool: str) -> provisioning.Usual | None:
        if not pool:
            return None
        if pool not in self._history:
            self._history[pool] = provisioning.usual(self._store.samples(provisioning.series(pool)))
        return self._history[pool]

    def _learn_duration(self, key: str, progress: lifecycle.Progress) -> None:
        """Only the live (leading) replica records, once per workload, so each scale-up counts once."""
        took = provisioning.measured(progress)
        if key in self._learned or not self._live or took is None:
            return
        self._learned.add(key)
        name = provisioning.series(progress.pool)
        self._store.add_sample(name, took.total_seconds(), keep=provisioning.HISTORY_KEEP)
        self._history[progress.pool] = provisioning.usual(self._store.samples(name))

    # -- telling -----------------------------------------------------------------------------------
    def _publish(
        self,
        key: str,
        thread: status.Thread,
        milestones: list[lifecycle.Milestone],
        *,
        place: str | None = None,
    ) -> None:
        """Edit the status message when its news changed (not for a step within a stage, nor while the
        autoscaler's verdict is due), and reply at the moments worth a notification; a finished run's
        reply carries what it cost."""
        workload = thread.workload
        if not self._live or not workload.thread_ts or not workload.channel:
            return
        note = provisioning.eta_note(thread.progress, self._usual(thread.progress.pool))
        if place is None:  # its place in line with an ETA, while its pool is full or Kueue holds it
            place = self._line(thread.workload.profile).get(key, "") if status.in_line(thread) else ""
        shown = status.thread_status(thread, note=note, place=place)
        if shown.connect is not None and shown.connect.forward and not thread.url:
            self._find_url(workload)
        before = self._shown.get(key)
        held = status.awaiting_verdict(thread, self._now())
        if not held and (before is None or before.news() != shown.news()):
            self._chat.update(workload.channel, workload.thread_ts, shown)
            self._shown[key] = shown
        for milestone in milestones:
            reply = status.milestone_reply(milestone, thread)
            if reply is None:
                continue
            if milestone.outcome is not None and thread.ending:
                reply = replace(reply, text=f"{full_stop(reply.text)} {thread.ending}")
            output = self._last_lines(workload) if milestone.outcome is lifecycle.Outcome.FAILED else ()
            if output:
                more = f"Its last lines are below; `/gpu logs {workload.name}` shows more."
                reply = replace(reply, text=f"{full_stop(reply.text)} {more}", output=output)
            self._chat.reply(workload.channel, workload.thread_ts, reply)

    def _line(self, profile: str) -> dict[str, str]:
        """The line for this profile's GPUs, worked out once for everyone in it: Kueue's for a profile
        with a queue, else the pool's pending pods."""
        mine = [t for t in self._threads.values() if t.workload.profile == profile]
        now = self._now()
        if any(t.workload.queue for t in mine):
            if self._kueue is None:
                return {}
            found = self._kueue.place_texts(self._threads.values(), now=now, policy=self._policy)
            return {t.workload.key: found[t.workload.key] for t in mine if t.workload.key in found}
        waiters = [
            queue.Waiter(t.workload.key, t.workload.gpus, t.workload.requested_at or t.progress.created)
            for t in mine
            if status.in_line(t)
        ]
        if not waiters:
            return {}
        holders = [
            held
            for t in mine
            if status.holds_gpus(t) and (held := queue.holder(t.workload, self._policy, now)) is not None
        ]
        return {key: queue.wait_text(place, now) for key, place in queue.places(waiters, holders).items()}

    def _requeue(self, profile: str, changed: str = "") -> None:
        """A change to what one workload means to its pool's line (`status.line_facts`) may move everyone
        in it: redraw those whose place moved (`_publish` edits only what changed). Other changes (a node's
        heartbeat reaching every thread) move nobody, and cost nothing here."""
        for key, place in self._line(profile).items():
            thread = self._threads.get(key)
            if key != changed and thread is not None and status.in_line(thread):
                self._publish(key, thread, [], place=place)

    def _last_lines(self, workload: workloads.Workload) -> tuple[str, ...]:
        """A failed run's evidence; none when its output cannot be read (the reply still says it failed)."""
        try:
            output = self._read_log(workload.namespace, workload.name, tail_lines=FAILURE_LINES)
        except errors.GpubotError as err:
            logger.info("no output for %s: %s", workload.key, err)
            return ()
        return tuple(output.splitlines())


def _may_bring(progress: lifecycle.Progress, node: lifecycle.NodeSeen) -> bool:
    """The node may be the one this workload's scale-up brings: its pool, created after the trigger,
    until its GPUs are seen. Not "until a later step": the node informer may lag the pod's (its watch cut
    and resumed), and its news is still the checklist's, recorded late without a reply."""
    triggered = progress.at(lifecycle.Step.SCALE_UP)
    if triggered is None or progress.outcome is not None or progress.at(lifecycle.Step.GPU_READY) is not None:
        return False
    return node.pool == progress.pool and (
        node.created is None or node.created >= triggered - NODE_CREATION_SLACK
    )


def _says_less(new: explain.Problem, shown: explain.Problem | None) -> bool:
    """A back-off after a failed scale-up, over the failure that caused it (the quota, a stockout)."""
    return new.key == "backoff" and shown is not None and shown.key in explain.SCALE_UP_FAILURES


def _remember(thread: status.Thread, milestones: list[lifecycle.Milestone]) -> status.Thread:
    """Keep the milestones' words the status shows: why it waits, the latest problem, the outcome.

    A problem describes the step the workload is stuck at, so a new step (not a late one) clears it.
    """
    for milestone in milestones:
        if milestone.step is lifecycle.Step.WAITING:
            thread = replace(thread, waiting_text=milestone.text)
        if milestone.step is not None and not milestone.late:
            thread = replace(thread, problem=None)
        if milestone.problem is not None and not _says_less(milestone.problem, thread.problem):
            thread = replace(thread, problem=milestone.problem)
        if milestone.outcome is not None:
            thread = replace(thread, outcome_text=milestone.text)
    return thread
