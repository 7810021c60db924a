"""Services: the scale channel's one message per episode, fed by the event and node informer callbacks.

The composition root fans the shared informers' callbacks out to this and to the tracker, and calls
`seed` with the nodes already there before the informers start, so neither the initial node list nor
old events are taken for a new episode, and a restart mid-episode opens a fresh message that says so.
An episode's first change posts its message (blocking, under the lock, so two informer threads can
never both post it); every later change is a coalesced edit of that message.

Every replica follows the episodes; only the leader speaks (`go_live` / `pause`). Which message shows an
episode is kept in the store, so a new leader edits it rather than posting a second one; so is each pool's
open episode's message, which a replica started mid-episode (it sees a resumed episode, under a new key)
takes over instead of leaving it at its last state and posting another.

`tick` (the leader's timer) asks why a pool is still up well after gpubot's last workload on it left.
Which gpubot pods are where comes from `held_workloads` at tick time (the tracker's pod informer, so a
tick costs the API nothing), and only while an episode has nodes up: the event and node callbacks feeding
this notifier cannot tell when a pod's container simply exited. The pods on the pool's nodes (anyone's)
and the autoscaler's status are read only once that wait is over, and the answer edits the episode's
message once. When the wait began (the last tick that saw gpubot on the pool) is kept in the store by
pool, so a restarted or new leader, which rebuilds the pool's nodes and gpubot's pods from Kubernetes,
goes on waiting from then rather than starting the wait again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from bot.core import (
    autoscaler_status,
    cluster_nodes,
    drain,
    episodes,
    errors,
    lifecycle,
    models,
    notices,
    podspec,
    ports,
    status,
    workloads,
)

logger = logging.getLogger(__name__)

FindWorkload = Callable[[str, str], workloads.Workload | None]
"""`(namespace, name)` → the gpubot workload, to say whose pod triggered a scale-up."""
OWNER_EVENTS = frozenset({"TriggeredScaleUp", "NotTriggerScaleUp"})
MESSAGE_MEMORY_SECONDS = 7 * 24 * 3600
"""How long the store remembers an episode's message; episodes last hours at most."""
WAIT_MEMORY_SECONDS = 24 * 3600
"""How long the store remembers when a pool's wait to drain began: a pool up a day after gpubot left it
was asked about long before."""


@dataclass(frozen=True)
class Posted:
    key: str
    ts: str
    shown: notices.ChannelEpisode


class ScaleNotifier:
    def __init__(
        self,
        chat_port: ports.Chat,
        channel: str,
        *,
        prices: Iterable[models.GpuProfile],
        clock: Callable[[], datetime],
        find_workload: FindWorkload | None = None,
        store: ports.Store | None = None,
        live: bool = True,
        cluster: ports.Cluster | None = None,
        held_workloads: Callable[[], Iterable[workloads.Workload]] | None = None,
        drain_expected_minutes: float = drain.DRAIN_EXPECTED.total_seconds() / 60,
    ) -> None:
        """`prices`: the profiles whose `price_per_hour` costs an episode, matched to pools by node labels.

        `held_workloads`: gpubot's pods now, as the informers hold them; `cluster`: where `tick` looks when
        a pool is still up `drain_expected_minutes` after the last of them on it left. Without both,
        `tick` does nothing."""
        self._chat = chat_port
        self._channel = channel
        self._profiles = tuple(prices)
        self._clock = clock
        self._find_workload = find_workload
        self._lock = threading.RLock()
        self._state = episodes.start(clock())
        self._prices: dict[str, float | None] = {}
        self._posted: dict[str, Posted] = {}
        self._store = store
        self._live = live
        self._cluster = cluster
        self._held_workloads = held_workloads
        self._drain_expected = timedelta(minutes=drain_expected_minutes)
        self._nodes: dict[str, cluster_nodes.Node] = {}
        """Each pool node's labels and annotations as the node informer last delivered them."""
        self._occupied_at: dict[str, datetime] = {}
        """Episode key → the last tick that saw a gpubot pod on (or waiting for) its pool, else the first."""
        self._why: dict[str, str] = {}
        """Episode key → why its pool is not draining, as the message shows it."""
        self._waits_kept: dict[str, str] = {}
        """Episode key → its pool, for each wait to drain this replica keeps in the store."""

    # -- reading ---------------------------------------------------------------------------------
    def go_live(self) -> None:
        """Leadership gained: speak from now on, bringing each open episode's message up to date."""
        with self._lock:
            self._live = True
            for episode in self._state.open_episodes():
                self._publish(episode)

    def pause(self) -> None:
        with self._lock:
            self._live = False

    # -- feeding ---------------------------------------------------------------------------------
    def seed(self, nodes: Iterable[lifecycle.NodeSeen]) -> int:
        """Nodes there now (`Cluster.list_nodes()`), before informers start; returns episodes resumed."""
        with self._lock:
            before = len(self._state.open_episodes())
            self._observe(episodes.Seeded(at=self._clock(), nodes=tuple(nodes)))
            return len(self._state.open_episodes()) - before

    def on_event(self, change: str, event: Mapping[str, Any]) -> None:
        if change == ports.DELETED:
            return  # events expire after an hour; that says nothing about the pool
        seen, subject = workloads.observe_event(event), workloads.event_subject(event)
        if seen is None or subject is None:
            return
        owner = self._owner(subject) if seen.reason in OWNER_EVENTS and subject.kind == "Pod" else ""
        with self._lock:
            self._observe(episodes.PoolEvent(seen, subject, owner))

    def on_node(self, change: str, node: Mapping[str, Any]) -> None:
        facts = cluster_nodes.read(node)
        if not facts.pool:
            return
        with self._lock:
            if self._prices.get(facts.pool) is None:
                self._prices[facts.pool] = episodes.pool_price(facts.labels, self._profiles)
            if change == ports.DELETED:
                self._nodes.pop(facts.name, None)
                self._observe(episodes.NodeRemoved(at=self._clock(), name=facts.name, pool=facts.pool))
                return
            self._nodes[facts.name] = facts
            seen = workloads.observe_node(node, at=cluster_nodes.last_seen(node) or self._clock())
            for observed in _joining(seen, known=facts.name in self._state.pool(facts.pool).present):
                self._observe(observed)

    # -- the drain check ---------------------------------------------------------------------------
    def tick(self) -> None:
        """Timer, on the leader: a pool still up well after gpubot's last workload left is told why."""
        cluster, held_workloads = self._cluster, self._held_workloads
        if cluster is None or held_workloads is None or not self._live:
            return
        with self._lock:
            watched = {
                e.key: (e, sorted(self._state.pool(e.pool).present))
                for e in self._state.open_episodes()
                if self._state.pool(e.pool).present
            }
            for done in (
                self._occupied_at.keys() | self._why.keys() | self._waits_kept.keys()
            ) - watched.keys():
                self._occupied_at.pop(done, None)
                self._why.pop(done, None)
                self._forget_wait(done)
        if not watched:
            return
        held = list(held_workloads())
        now = self._clock()
        for episode, nodes in watched.values():
            self._check_drain(cluster, episode, nodes, held=held, now=now)

    def _check_drain(
        self,
        cluster: ports.Cluster,
        episode: episodes.Episode,
        nodes: list[str],
        *,
        held: list[workloads.Workload],
        now: datetime,
    ) -> None:
        key, pool = episode.key, episode.pool
        if occupies(held, nodes):
            with self._lock:
                if key not in self._occupied_at:  # a wait a stopped leader kept is over too
                    self._waits_kept.setdefault(key, pool)
                self._occupied_at[key] = now
                self._forget_wait(key)
                if self._why.pop(key, None) is not None:
                    self._republish(key)  # gpubot uses the pool again: the question no longer stands
            return
        with self._lock:
            since = self._occupied_at.get(key) or self._recall_wait(episode) or now
            self._occupied_at[key] = since
            self._keep_wait(key, pool, since)
            if key in self._why or now - since < self._drain_expected:
                return
        try:
            text = self._explain(cluster, pool, nodes, idle=now - since)
        except errors.GpubotError as err:
            logger.warning("cannot tell why %s is not draining: %s", pool, err)
            return
        with self._lock:
            self._why[key] = text
            self._republish(key)

    def _explain(self, cluster: ports.Cluster, pool: str, nodes: list[str], *, idle: timedelta) -> str:
        """The one read of the pods on the pool's nodes and of the autoscaler's status, and the answer."""
        pods = [drain.read_pod(pod) for pod in cluster.list_pods_on_nodes(nodes)]
        status_text = cluster.read_autoscaler_status()
        min_size = autoscaler_status.parse(status_text).pool_sizes().get(pool, (None, None))[0]
        with self._lock:
            facts = [self._nodes.get(name) or cluster_nodes.Node(name) for name in nodes]
        reasons = drain.diagnose(pool, nodes=facts, pods=pods, status_text=status_text, min_size=min_size)
        logger.info("%s not draining: %s", pool, ", ".join(r.cause.value for r in reasons))
        return drain.describe(pool, reasons, nodes=len(nodes), idle=idle)

    # -- the wait kept in the store, so a restart goes on with it --------------------------------------
    def _key(self, kind: str, name: str) -> str:
        """A store key of this channel: `drain-since`, `episode-open` by pool, `episode-message` by key."""
        return f"{kind}:{self._channel}:{name}"

    def _recall_wait(self, episode: episodes.Episode) -> datetime | None:
        """When the pool's wait began, as the leader before this one (or this one before a restart) kept
        it; a wait from before this episode began is an earlier episode's, left by a leader killed then.
        An episode a restart opened began at the restart, so its wait may be older."""
        if self._store is None:
            return None
        kept = self._store.recall(self._key("drain-since", episode.pool))
        since = podspec.parse_time(kept) if kept else None
        if since is None or (since < episode.started_at and not episode.resumed):
            return None
        return since

    def _keep_wait(self, key: str, pool: str, since: datetime) -> None:
        """Once per wait: its start, for whoever leads next. Caller holds the lock."""
        if self._store is None or key in self._waits_kept:
            return
        self._store.remember(self._key("drain-since", pool), podspec.format_time(since), WAIT_MEMORY_SECONDS)
        self._waits_kept[key] = pool

    def _forget_wait(self, key: str) -> None:
        """The wait is over (gpubot is back on the pool, or the episode ended). Caller holds the lock."""
        pool = self._waits_kept.pop(key, None)
        if self._store is not None and pool is not None:
            self._store.remember(self._key("drain-since", pool), "", 1)

    def _republish(self, key: str) -> None:
        for episode in self._state.open_episodes():
            if episode.key == key:
                self._publish(episode)

    # -- internals -------------------------------------------------------------------------------
    def _owner(self, subject: workloads.EventSubject) -> str:
        if self._find_workload is None:
            return ""
        try:
            workload = self._find_workload(subject.namespace, subject.name)
        except errors.GpubotError as err:
            logger.info("cannot tell who owns %s/%s: %s", subject.namespace, subject.name, err)
            return ""
        if workload is None:
            return ""
        return workload.requester_name or workload.owner_id

    def _observe(self, seen: episodes.Observation) -> None:
        before = self._state
        self._state, changed = episodes.advance(before, seen)
        if not changed:
            return
        for name, pool in self._state.pools.items():
            if pool.episode is not None and pool.episode != before.pool(name).episode:
                self._publish(pool.episode)

    def _publish(self, episode: episodes.Episode) -> None:
        if not self._live:
            return
        notice = episodes.to_notice(episode, now=self._clock(), price_per_hour=self._prices.get(episode.pool))
        why = self._why.get(episode.key) if not episode.closed else None
        if why:
            notice = replace(notice, warning="\n".join(text for text in (notice.warning, why) if text))
        posted = self._posted.get(episode.pool)
        if (posted is None or posted.key != episode.key) and (ts := self._recall(episode)):
            posted = Posted(episode.key, ts, notices.ChannelEpisode(pool="", headline=""))
        if posted is not None and posted.key == episode.key:
            if posted.shown != notice:
                self._chat.update(self._channel, posted.ts, notice)
                self._posted[episode.pool] = Posted(episode.key, posted.ts, notice)
                self._keep_ts(episode, posted.ts)
            return
        try:
            ts = self._chat.post(self._channel, notice)
        except errors.GpubotError as err:
            # Nothing was sent (a timed-out post is withdrawn): the next change tries again, still once.
            logger.error("could not post the %s scale episode to %s: %s", episode.pool, self._channel, err)
            return
        logger.info("scale episode %s: posted %s in %s", episode.key, ts, self._channel)
        self._posted[episode.pool] = Posted(episode.key, ts, notice)
        self._keep_ts(episode, ts)

    def _keep_ts(self, episode: episodes.Episode, ts: str) -> None:
        if self._store is None:
            return
        self._store.remember(self._key("episode-message", episode.key), ts, MESSAGE_MEMORY_SECONDS)
        open_ts = "" if episode.closed else ts
        self._store.remember(self._key("episode-open", episode.pool), open_ts, MESSAGE_MEMORY_SECONDS)

    def _recall(self, episode: episodes.Episode) -> str | None:
        """The message another replica (or this one before a restart) posted for this episode; for an
        episode resumed by a restart, the message of the pool's episode still open when it happened."""
        if self._store is None:
            return None
        found = self._store.recall(self._key("episode-message", episode.key))
        if found is None and episode.resumed:
            found = self._store.recall(self._key("episode-open", episode.pool)) or None
        return found


def _joining(seen: lifecycle.NodeSeen, *, known: bool) -> list[lifecycle.NodeSeen]:
    """The node as seen; a node first seen already Ready is also seen joining at its creation."""
    created = seen.created
    if known or not seen.ready or created is None or created >= seen.at:
        return [seen]
    return [lifecycle.NodeSeen(at=created, name=seen.name, ready=False, gpus=0, pool=seen.pool), seen]


def occupies(held: Iterable[workloads.Workload], nodes: Collection[str]) -> bool:
    """A gpubot pod still on one of the nodes, or one still waiting for a node (it may be for this pool)."""
    return any(
        status.holds_gpu(w) and (w.node in nodes or (not w.node and not w.deletion_requested)) for w in held
    )
