"""What the GPU-hours bench measures on the sim, the same way in every arm: billed nodes, busy GPUs, waits.

- Billed node-hours: each GPU node from its VM's start to its deletion, as the cloud bills. The sim's VM
  registers as a Node exactly `provision_delay` after the autoscaler asks for it, so a Node created at t
  was billed from t - provision_delay. Read from the sim's single commit path, so nothing is missed.
- Busy GPU-hours: the sim's DCGM exporter model (`sim/cluster/metrics.py`), read at every 15 s scrape:
  a GPU counts as busy for that scrape when its utilisation is at or above the reaper's threshold.
- Time to Running: from the owner's request (the trace's arrival) to the pod's phase Running.
- Where the billed hours that were not busy went, per node and scrape: starting (VM boot, GPU plugin,
  image pull), idle while the owner still wanted it, idle after the owner was done, stopping, or empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import trace
from sim.cluster import metrics, nodes, world
from sim.cluster.store import ADDED, DELETED, Change, Obj

POOL = "gpu-pool"
NAMESPACE = "default"
SCRAPE = metrics.SCRAPE_INTERVAL
BUSY_THRESHOLD = 5.0
"""Percent: gpubot's default idle threshold (bot/settings.py), so busy means what the reaper means."""
UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
STATES = ("busy", "starting", "idle, wanted", "idle, owner done", "stopping", "empty")


@dataclass
class PodTimes:
    created: float
    running: float | None = None
    finished: float | None = None
    deleted: float | None = None


@dataclass
class Ledger:
    """Listens to the sim's store; every time is the trace's (seconds from midnight), see `attach`."""

    provision_delay: float
    node_spans: dict[str, list[float | None]] = field(default_factory=dict)
    """Node name → [billed from, deleted at or None]."""
    pods: dict[str, PodTimes] = field(default_factory=dict)
    now: Callable[[], float] = lambda: 0.0

    def record(self, change: Change) -> None:
        meta = change.obj["metadata"]
        if change.resource == "nodes" and nodes.pool_of(change.obj) == POOL:
            if change.type == ADDED:
                self.node_spans[meta["name"]] = [self.now() - self.provision_delay, None]
            elif change.type == DELETED and meta["name"] in self.node_spans:
                self.node_spans[meta["name"]][1] = self.now()
        elif change.resource == "pods" and meta.get("namespace") == NAMESPACE:
            self._pod(change)

    def _pod(self, change: Change) -> None:
        name = change.obj["metadata"]["name"]
        if change.type == ADDED:
            self.pods[name] = PodTimes(created=self.now())
        times = self.pods.get(name)
        if times is None:
            return
        phase = change.obj.get("status", {}).get("phase")
        if phase == "Running" and times.running is None:
            times.running = self.now()
        if phase in ("Succeeded", "Failed") and times.finished is None:
            times.finished = self.now()
        if change.type == DELETED:
            times.deleted = self.now()

    def billed_hours(self, until: float) -> float:
        spans = (
            (start or 0.0, min(end if end is not None else until, until))
            for start, end in self.node_spans.values()
        )
        return sum(max(end - start, 0.0) for start, end in spans) / 3600


def attach(sim: world.BackgroundWorld, *, origin: float) -> Ledger:
    """The sim starts at `origin` of the trace's day: the empty hours before it need no simulating."""
    ledger = Ledger(
        provision_delay=sim.world.timings.provision_delay, now=lambda: sim.world.clock.now() + origin
    )
    sim.run(lambda: sim.world.store.subscribe(ledger.record))
    return ledger


# -- scrapes ------------------------------------------------------------------------------------------


@dataclass
class Scrapes:
    """Per 15 s scrape: the pool's size, busy GPUs, and what each billed machine was doing."""

    jobs: dict[str, trace.Job]
    ledger: Ledger
    pool_size: list[tuple[float, int]] = field(default_factory=list)
    busy_scrapes: int = 0
    states: Counter[str] = field(default_factory=Counter)

    def take(self, sim: world.BackgroundWorld) -> None:
        size, busy, states = sim.run(lambda: self._read(sim.world))
        self.pool_size.append((self.ledger.now(), size))
        self.busy_scrapes += busy
        self.states.update(states)

    def _read(self, w: world.World) -> tuple[int, int, Counter[str]]:
        now = self.ledger.now()
        unix = w.clock.epoch.timestamp() + w.clock.now()
        busy_pods = {
            s.labels["pod"]
            for s in w.metrics.series()
            if s.labels["__name__"] == UTIL_METRIC and s.first <= unix and s.value_at(unix) >= BUSY_THRESHOLD
        }
        pool_nodes = w.node_ctl.nodes_of(POOL)
        booting = len(w.node_ctl.instances_of(POOL))
        states: Counter[str] = Counter({"starting": booting})
        live = [
            p for p in w.store.iter_raw("pods") if p["status"].get("phase") not in ("Succeeded", "Failed")
        ]
        for node in pool_nodes:
            on_node = [p for p in live if p["spec"].get("nodeName") == node["metadata"]["name"]]
            states[self._state(node, on_node, busy_pods, now)] += 1
        return len(pool_nodes) + booting, len(busy_pods), states

    def _state(self, node: Obj, on_node: list[Obj], busy_pods: set[str], now: float) -> str:
        if not nodes.is_ready(node) or nodes.has_unready_gpu(node):
            return "starting"
        if not on_node:
            return "empty"
        pod = on_node[0]
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp"):
            return "stopping"
        if name in busy_pods:
            return "busy"
        times = self.ledger.pods.get(name)
        if pod["status"].get("phase") != "Running" or times is None or times.running is None:
            return "starting"
        job = self.jobs.get(name)
        return "idle, wanted" if job is not None and wanted(job, times.running, now) else "idle, owner done"

    def busy_hours(self) -> float:
        return self.busy_scrapes * SCRAPE / 3600

    def state_hours(self) -> dict[str, float]:
        return {state: round(self.states[state] * SCRAPE / 3600, 2) for state in STATES}


def wanted(job: trace.Job, running_since: float, now: float) -> bool:
    """Whether the owner still wants the pod: a batch job until its command ends, a session until the
    owner is done with it (a release that comes later does not make the wait wanted)."""
    return now - running_since < job.length
