"""The simulated Cluster Autoscaler: scale node groups up from zero for pending pods, and back down.

It follows the upstream loop: every scan interval, look at unschedulable pods old enough to count,
pretend-schedule them on upcoming nodes, then on each group's template node; grow the best group,
or say per pod why nothing helps. Empty nodes unneeded for long enough are removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import yaml

from sim.clock import Clock
from sim.cluster import events, fit, messages, nodes, pools
from sim.cluster.config import Faults, Timings, doubling
from sim.cluster.scheduler import unschedulable_condition
from sim.cluster.store import Obj, Store, rfc3339

logger = logging.getLogger(__name__)

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # written every scan: libyaml when present

STATUS_NAMESPACE, STATUS_NAME = "kube-system", "cluster-autoscaler-status"
LAST_UPDATED = "cluster-autoscaler.kubernetes.io/last-updated"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
MIRROR = "kubernetes.io/config.mirror"
"""The kubelet's annotation on a static pod's API copy (a mirror pod)."""


@dataclass
class GroupState:
    backoff_until: float = 0.0
    backoff_count: int = 0
    backoff_reason: tuple[str, str] | None = None
    last_scale_up: float = -1e9
    scale_up_in_progress: bool = False


@dataclass
class Autoscaler:
    store: Store
    registry: pools.PoolRegistry
    node_ctl: nodes.NodeController
    recorder: events.Recorder
    timings: Timings
    faults: Faults
    groups: dict[str, GroupState] = field(default_factory=dict)
    unneeded_since: dict[str, float] = field(default_factory=dict)
    last_scale_up: float = -1e9
    last_pod_event: dict[tuple[str, str], float] = field(default_factory=dict)
    scale_up_status: str = "NoActivity"

    def start(self) -> None:
        self.write_status()
        self.store.clock.call_later(self.timings.scan_interval, self._loop)

    def _loop(self) -> None:
        self.run_once()
        self.store.clock.call_later(self.timings.scan_interval, self._loop)

    def now(self) -> float:
        return self.store.clock.now()

    def group_pools(self) -> list[pools.NodePool]:
        """Node groups the autoscaler may scale: a pool still being created or deleted is not one yet."""
        return sorted((p for p in self.registry.list() if p.autoscaling and p.serving), key=lambda p: p.name)

    def state(self, pool: str) -> GroupState:
        return self.groups.setdefault(pool, GroupState())

    # -- the loop ----------------------------------------------------------------------------
    def run_once(self) -> None:
        self.check_provisioning()
        pending = self.pods_to_help()
        self.scale_up(pending)
        self.scale_down()
        self.write_status()

    def pods_to_help(self) -> list[Obj]:
        out = []
        for pod in self.store.iter_raw("pods"):
            condition = unschedulable_condition(pod)
            # Only reason Unschedulable counts (isUnschedulable in kubernetes/autoscaler cluster-autoscaler/
            # utils/kubernetes/listers.go, 1.32): a pod still SchedulingGated is not the autoscaler's to help.
            if (
                pod["spec"].get("nodeName")
                or pod["metadata"].get("deletionTimestamp")
                or condition is None
                or condition.get("reason") != "Unschedulable"
            ):
                continue
            created = self.store.clock.from_stamp(pod["metadata"]["creationTimestamp"])
            buffer = (
                self.timings.gpu_pod_buffer
                if fit.pod_requests(pod).get(nodes.GPU)
                else self.timings.pod_buffer
            )
            if self.now() - created >= buffer:
                out.append(pod)
        return sorted(out, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))

    def scale_up(self, pending: list[Obj]) -> None:
        leftover = self._after_upcoming(pending)
        if not leftover:
            self.scale_up_status = "InProgress" if self._anything_upcoming() else "NoActivity"
            return
        self.scale_up_status = "Needed"
        options: dict[str, list[Obj]] = {}
        reasons: dict[str, list[str]] = {}
        for pod in leftover:
            key = pod["metadata"]["uid"]
            reasons[key] = []
            for pool in self.group_pools():
                why = self._group_rejects(pool, pod)
                if why:
                    reasons[key].extend(why)
                else:
                    options.setdefault(pool.name, []).append(pod)
        if options:
            best = max(options, key=lambda name: (len(options[name]), -self._waste(name)))
            # A scale-up, even a failed one, means no NotTriggerScaleUp this loop (upstream ScaleUpError).
            self._expand(self.registry.get(best), options[best])
            return
        for pod in leftover:
            self._pod_event(
                pod,
                "NotTriggerScaleUp",
                messages.not_triggered_scale_up(reasons[pod["metadata"]["uid"]]),
            )

    def _after_upcoming(self, pending: list[Obj]) -> list[Obj]:
        """Pods that neither existing nodes nor upcoming ones (unregistered, unready, GPU-less) will take."""
        # FilterOutSchedulable: pods the scheduler is about to place on existing nodes need no new node.
        bound: dict[str, list[Obj]] = {}
        for pod in self.store.iter_raw("pods"):
            if pod["spec"].get("nodeName"):
                bound.setdefault(pod["spec"]["nodeName"], []).append(pod)
        capacity: list[tuple[Obj, fit.Resources]] = [
            (n, fit.used_resources(bound.get(n["metadata"]["name"], [])))
            for n in self.store.iter_raw("nodes")
        ]
        for pool in self.registry.list():
            template = nodes.template_node(pool)
            capacity += [(template, {}) for _ in range(self._upcoming(pool))]
        leftover = []
        first_fit = FirstFit()
        for pod in pending:
            if not first_fit.place(pod, capacity):
                leftover.append(pod)
        return leftover

    def _anything_upcoming(self) -> bool:
        return any(self._upcoming(p) for p in self.registry.list())

    def _upcoming(self, pool: pools.NodePool) -> int:
        """clusterstate GetUpcomingNodes: the target less the usable nodes (GPU-unready ones are not)."""
        if not pool.serving:
            return 0
        usable = sum(
            1 for n in self.node_ctl.nodes_of(pool.name) if nodes.is_ready(n) and not nodes.has_unready_gpu(n)
        )
        return max(pool.target_size - usable, 0)

    def _group_rejects(self, pool: pools.NodePool, pod: Obj) -> list[str]:
        state = self.state(pool.name)
        if state.backoff_until > self.now():
            return [messages.IN_BACKOFF]
        result = fit.filter_node(pod, nodes.template_node(pool))
        if not result.fits:
            return list(result.reasons)
        if pool.target_size >= pool.max_size:
            return [messages.MAX_NODE_GROUP_SIZE_REACHED]
        return []

    def _waste(self, pool_name: str) -> int:
        machine = pools.machine(self.registry.get(pool_name).machine_type)
        return machine.cpu_milli

    def _expand(self, pool: pools.NodePool, pods: list[Obj]) -> bool:
        needed = self._nodes_needed(pool, pods)
        new_size = min(pool.target_size + needed, pool.max_size)
        group = pool.group_id()
        state = self.state(pool.name)
        old = pool.target_size
        # executor.go announces the new size before asking the cloud, then says whether it was set.
        self._status_event(
            "Normal", "ScaledUpGroup", messages.scaled_up_group(group, new_size, old, pool.max_size)
        )
        failure = self._injected_failure(pool)
        if failure is not None:
            code, message, reason = failure
            self._fail_group(pool, code, message)
            self._status_event("Warning", "FailedToScaleUpGroup", messages.failed_to_scale_up(group, message))
            for pod in pods:
                self._pod_event(
                    pod, "FailedScaleUp", messages.gke_failed_scale_up(pool.zone, reason), type_="Warning"
                )
            return False
        self.registry.set_size(pool.name, new_size)
        self._status_event(
            "Normal", "ScaledUpGroup", messages.scaled_up_group_done(group, new_size, old, pool.max_size)
        )
        state.last_scale_up = self.last_scale_up = self.now()
        info = messages.scale_up_info(group, old, new_size, pool.max_size)
        for pod in pods:
            self._pod_event(pod, "TriggeredScaleUp", messages.triggered_scale_up([info]), dedupe=False)
        self.scale_up_status = "InProgress"
        return True

    def _nodes_needed(self, pool: pools.NodePool, pods: list[Obj]) -> int:
        bins: list[tuple[Obj, fit.Resources]] = []
        template = nodes.template_node(pool)
        first_fit = FirstFit()
        for pod in pods:
            if not first_fit.place(pod, bins):
                bins.append((template, fit.pod_requests(pod)))
        return max(len(bins), 1)

    def _injected_failure(self, pool: pools.NodePool) -> tuple[str, str, str] | None:
        """(error code, cloud message, GKE's reason) of a scale-up the cloud refuses, or None."""
        if pool.name in self.faults.stockout:
            return messages.STOCKOUT_ERROR_CODE, messages.STOCKOUT_MESSAGE, messages.GCE_OUT_OF_RESOURCES
        if pool.name in self.faults.quota_exceeded:
            region = pool.zone.rsplit("-", 1)[0]
            metric = f"NVIDIA_{pool.accelerator.removeprefix('nvidia-tesla-').upper()}_GPUS"
            limit = float(pool.target_size * pool.gpus_per_node)  # the GPUs it has now
            return (
                messages.QUOTA_ERROR_CODE,
                messages.quota_message(metric, limit, region),
                messages.GCE_QUOTA_EXCEEDED,
            )
        return None

    def _fail_group(self, pool: pools.NodePool, code: str, message: str) -> None:
        state = self.state(pool.name)
        state.backoff_count += 1
        wait = doubling(self.timings.backoff_initial, self.timings.backoff_max, state.backoff_count - 1)
        state.backoff_until = self.now() + wait
        state.backoff_reason = (code, message)

    def check_provisioning(self) -> None:
        """Instances that never registered within max-node-provision-time count as a failed scale-up."""
        for pool in self.registry.list():
            late = [
                i
                for i in self.node_ctl.instances_of(pool.name)
                if self.now() - i.requested_at >= self.timings.max_node_provision_time
            ]
            if not late:
                continue
            self.node_ctl.forget_instances(pool.name, len(late))
            self.registry.set_size(pool.name, max(pool.target_size - len(late), 0))
            self._status_event(
                "Warning",
                "ScaleUpTimedOut",
                messages.scale_up_timed_out(pool.group_id(), self.timings.max_node_provision_time),
            )
            self._fail_group(
                pool,
                "timeout",
                messages.scale_up_timed_out(pool.group_id(), self.timings.max_node_provision_time),
            )

    # -- scale-down --------------------------------------------------------------------------
    def scale_down(self) -> None:
        candidates = [
            (pool, node)
            for pool in self.group_pools()
            for node in self.node_ctl.nodes_of(pool.name)
            if self._unneeded(node)
        ]
        # Rebuilt every loop, so a node that was needed again, or is gone, starts its 10 minutes afresh.
        self.unneeded_since = {
            node["metadata"]["name"]: self.unneeded_since.get(node["metadata"]["name"], self.now())
            for _, node in candidates
        }
        if self.now() - self.last_scale_up < self.timings.scale_down_delay_after_add:
            return
        for pool, node in candidates:
            name = node["metadata"]["name"]
            if self.now() - self.unneeded_since[name] < self.timings.scale_down_unneeded:
                continue
            if pool.target_size <= pool.min_size:
                continue
            self._remove_node(pool, node)

    def _unneeded(self, node: Obj) -> bool:
        if not nodes.is_ready(node) or nodes.has_unready_gpu(node):
            return False
        if (node["metadata"].get("annotations") or {}).get(SCALE_DOWN_DISABLED) == "true":
            return False
        return not [p for p in self._pods_on(node["metadata"]["name"]) if not _is_daemon(p)]

    def _pods_on(self, node_name: str) -> list[Obj]:
        return [
            p
            for p in self.store.iter_raw("pods")
            if p["spec"].get("nodeName") == node_name
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]

    def blockers(self, node_name: str) -> list[Obj]:
        """Pods that keep a node from being removed; `gpubot` will explain these to its users."""
        return [p for p in self._pods_on(node_name) if not _is_daemon(p)]

    def _remove_node(self, pool: pools.NodePool, node: Obj) -> None:
        name = node["metadata"]["name"]
        self._status_event("Normal", "ScaleDownEmpty", messages.scale_down_empty(name))

        def taint(n: Obj) -> None:
            n["spec"].setdefault("taints", []).append(
                {
                    "key": nodes.TO_BE_DELETED_TAINT,
                    # upstream stores the Unix time the node was marked
                    "value": str(int(self.store.clock.datetime().timestamp())),
                    "effect": "NoSchedule",
                }
            )

        marked = self.store.mutate("nodes", "", name, taint) or node
        self.recorder.record(
            marked, "Normal", "ScaleDown", messages.SCALE_DOWN_MARKED, component=messages.AUTOSCALER
        )
        self.recorder.record(
            marked, "Normal", "ScaleDown", messages.SCALE_DOWN_REMOVED, component=messages.AUTOSCALER
        )
        self.node_ctl.delete_node(name)
        self.registry.set_size(pool.name, max(pool.target_size - 1, 0))
        self.unneeded_since.pop(name, None)
        self._status_event("Normal", "ScaleDownEmpty", messages.scale_down_empty_removed(name))

    # -- reporting ---------------------------------------------------------------------------
    def _pod_event(
        self, pod: Obj, reason: str, message: str, *, type_: str = "Normal", dedupe: bool = True
    ) -> None:
        key = (pod["metadata"]["uid"], reason + message)
        last = self.last_pod_event.get(key)
        if dedupe and last is not None and self.now() - last < self.timings.event_dedupe_window:
            return
        self.last_pod_event[key] = self.now()
        self.recorder.record(pod, type_, reason, message, component=messages.AUTOSCALER)

    def _status_event(self, type_: str, reason: str, message: str) -> None:
        status = self.store.get("configmaps", STATUS_NAMESPACE, STATUS_NAME)
        if status is not None:
            self.recorder.record(status, type_, reason, message, component=messages.AUTOSCALER)

    def write_status(self) -> None:
        text = yaml.dump(self.status(), Dumper=_DUMPER, sort_keys=False)
        stamp = self.store.clock.datetime().strftime("%Y-%m-%d %H:%M:%S.%f000 +0000 UTC")
        current = self.store.get("configmaps", STATUS_NAMESPACE, STATUS_NAME)
        if current is None:
            self.store.create(
                "configmaps",
                {
                    "kind": "ConfigMap",
                    "apiVersion": "v1",
                    "metadata": {
                        "name": STATUS_NAME,
                        "namespace": STATUS_NAMESPACE,
                        "annotations": {LAST_UPDATED: stamp},
                    },
                    "data": {"status": text},
                },
            )
            return

        def update(cm: Obj) -> None:
            cm["data"] = {"status": text}
            cm["metadata"].setdefault("annotations", {})[LAST_UPDATED] = stamp

        self.store.mutate("configmaps", STATUS_NAMESPACE, STATUS_NAME, update)

    def status(self) -> dict[str, object]:
        """ClusterAutoscalerStatus in the current YAML shape (clusterstate/api/types.go)."""
        probe = rfc3339(self.store.clock)
        groups = []
        all_nodes = list(self.store.iter_raw("nodes"))
        for pool in self.group_pools():
            members = self.node_ctl.nodes_of(pool.name)
            state = self.state(pool.name)
            scale_up: dict[str, object] = {
                "status": self._group_scale_up(pool, state),
                "lastProbeTime": probe,
            }
            if state.backoff_until > self.now() and state.backoff_reason:
                scale_up["backoffInfo"] = {
                    "errorCode": state.backoff_reason[0],
                    "errorMessage": state.backoff_reason[1],
                }
            candidates = sum(1 for n in members if n["metadata"]["name"] in self.unneeded_since)
            groups.append(
                {
                    "name": pool.group_id(),
                    "health": {
                        "status": "Healthy",
                        "nodeCounts": _counts(
                            members, self.node_ctl.instances_of(pool.name), self.store.clock
                        ),
                        "cloudProviderTarget": pool.target_size,
                        "minSize": pool.min_size,
                        "maxSize": pool.max_size,
                        "lastProbeTime": probe,
                    },
                    "scaleUp": scale_up,
                    "scaleDown": {
                        "status": "CandidatesPresent" if candidates else "NoCandidates",
                        "candidates": candidates,
                        "lastProbeTime": probe,
                    },
                }
            )
        instances = [i for p in self.registry.list() for i in self.node_ctl.instances_of(p.name)]
        total_candidates = len(self.unneeded_since)
        return {
            "time": self.store.clock.datetime().strftime("%Y-%m-%d %H:%M:%S.%f000 +0000 UTC"),
            "autoscalerStatus": "Running",
            "clusterWide": {
                "health": {
                    "status": "Healthy",
                    "nodeCounts": _counts(all_nodes, instances, self.store.clock),
                    "lastProbeTime": probe,
                },
                "scaleUp": {"status": self.scale_up_status, "lastProbeTime": probe},
                "scaleDown": {
                    "status": "CandidatesPresent" if total_candidates else "NoCandidates",
                    "candidates": total_candidates,
                    "lastProbeTime": probe,
                },
            },
            "nodeGroups": groups,
        }

    def _group_scale_up(self, pool: pools.NodePool, state: GroupState) -> str:
        if state.backoff_until > self.now():
            return "Backoff"
        return "InProgress" if self._upcoming(pool) else "NoActivity"


MAX_NODE_STARTUP_TIME = 15 * 60.0
"""clusterstate MaxNodeStartupTime: an unready node younger than this is NotStarted rather than Unready."""


class FirstFit:
    """First-fit of pods into nodes whose use only grows, as the binpacking estimator does.

    A node that turned one pod away turns away every later pod placed alike (same requests, tolerations,
    selectors), so each kind of pod resumes where the last of its kind went: a thousand alike pods cost a
    pass over the nodes, not a pass per pod."""

    def __init__(self) -> None:
        self._start: dict[str, int] = {}

    def place(self, pod: Obj, nodes_and_use: list[tuple[Obj, fit.Resources]]) -> bool:
        """Add the pod's requests to the first node it fits; False when none does."""
        kind = fit.placement_kind(pod)
        for index in range(self._start.get(kind, 0), len(nodes_and_use)):
            node, used = nodes_and_use[index]
            if fit.filter_node(pod, node, used=used).fits:
                fit.add_resources(used, fit.pod_requests(pod))
                self._start[kind] = index
                return True
        self._start[kind] = len(nodes_and_use)
        return False


def _counts(members: list[Obj], instances: list[nodes.Instance], clock: Clock) -> dict[str, object]:
    """clusterstate updateReadinessStats: a GPU node without allocatable GPUs counts as unready (resource)."""
    ready = not_started = unready = resource_unready = deleting = 0
    for node in members:
        if nodes.is_ready(node) and not nodes.has_unready_gpu(node):
            ready += 1
        elif clock.now() - clock.from_stamp(node["metadata"]["creationTimestamp"]) < MAX_NODE_STARTUP_TIME:
            not_started += 1
        else:
            unready += 1
            resource_unready += nodes.is_ready(node)
        deleting += any(t.get("key") == nodes.TO_BE_DELETED_TAINT for t in node["spec"].get("taints", []))
    return {
        "registered": {
            "total": len(members),
            "ready": ready,
            "notStarted": not_started,
            "beingDeleted": deleting,
            "unready": {"total": unready, "resourceUnready": resource_unready},
        },
        "longUnregistered": 0,
        "unregistered": len(instances),
    }


def _is_daemon(pod: Obj) -> bool:
    """DaemonSet and mirror (static) pods: upstream's drain rules skip both, so neither keeps a node."""
    if MIRROR in (pod["metadata"].get("annotations") or {}):
        return True
    return any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or [])
