"""The embedded cluster end to end, behaving as GKE with the Cluster Autoscaler: real client, manual clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client

from sim import seed
from sim.clock import EPOCH
from sim.cluster import pools, world

GPU_POOL = "gpu-pool"
GPU = "nvidia.com/gpu"
POOL_LABEL = "cloud.google.com/gke-nodepool"
STATUS_NS, STATUS_NAME = "kube-system", "cluster-autoscaler-status"


def pod(
    name: str,
    *,
    image: str = "busybox:1.36",
    command: list[str] | None = None,
    gpus: int = 0,
    selector: dict[str, str] | None = None,
    restart: str = "Always",
    annotations: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image, "command": command or ["sleep", "3600"]}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    metadata: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if owner:
        metadata["ownerReferences"] = [owner]
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": restart}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def gpu_pod(name: str, gpus: int = 1, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("selector", {"app-type": "gpu-workloads"})
    return pod(name, image="nvidia/cuda:12.2.0-base-ubuntu22.04", gpus=gpus, **kwargs)


def now(sim: world.BackgroundWorld) -> float:
    return sim.run(sim.world.clock.now)


def seconds(moment: Any) -> float:
    return float((moment - EPOCH).total_seconds())


def events_of(core: client.CoreV1Api, name: str, namespace: str = "default") -> list[Any]:
    """Events about one object in the order they first happened (eventTime has microseconds)."""
    found = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return sorted(found, key=lambda e: (e.event_time, int(e.metadata.resource_version)))


def reasons(core: client.CoreV1Api, name: str, namespace: str = "default") -> list[str]:
    return [e.reason for e in events_of(core, name, namespace)]


def with_reason(core: client.CoreV1Api, name: str, reason: str, namespace: str = "default") -> list[Any]:
    return [e for e in events_of(core, name, namespace) if e.reason == reason]


def status_events(core: client.CoreV1Api, reason: str) -> list[Any]:
    return with_reason(core, STATUS_NAME, reason, STATUS_NS)


def autoscaler_status(core: client.CoreV1Api) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        core.read_namespaced_config_map(STATUS_NAME, STATUS_NS).data["status"]
    )
    return loaded


def group_status(core: client.CoreV1Api, pool: str = GPU_POOL) -> dict[str, Any]:
    for group in autoscaler_status(core)["nodeGroups"]:
        if f"-{pool}-grp" in group["name"]:
            return dict(group)
    raise AssertionError(f"no node group for {pool}")


def pool_nodes(core: client.CoreV1Api, pool: str = GPU_POOL) -> list[Any]:
    return list(core.list_node(label_selector=f"{POOL_LABEL}={pool}").items)


def ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def target_size(sim: world.BackgroundWorld, pool: str = GPU_POOL) -> int:
    """The MIG target size is not visible through the Kubernetes API, so read it from the registry."""
    return sim.run(lambda: sim.world.registry.get(pool).target_size)


def group_id(sim: world.BackgroundWorld, pool: str = GPU_POOL) -> str:
    return sim.run(lambda: sim.world.registry.get(pool).group_id())


def advance_until(
    sim: world.BackgroundWorld, done: Callable[[], bool], *, limit: float, step: float = 5.0
) -> float:
    """Move the clock `step` at a time until `done()`; returns the simulated time it first held."""
    deadline = now(sim) + limit
    while not done():
        if now(sim) >= deadline:
            raise AssertionError(f"condition not reached within {limit}s of simulated time")
        sim.advance(step, step=step)
    return now(sim)


# -- scenarios -------------------------------------------------------------------------------
UNMATCHED_DEFAULT_POOL = (
    "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)
NOT_READY_NODE = (
    "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
    "2 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)
GPU_NOT_YET_ALLOCATABLE = (
    "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
    "2 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
    "2 Preemption is not helpful for scheduling."
)


def first_of(events: list[Any], reason: str, message: str | None = None) -> Any:
    for event in events:
        if event.reason == reason and (message is None or event.message == message):
            return event
    raise AssertionError(f"no {reason} event ({message}) in {[e.reason for e in events]}")


def test_seed_scenario_scales_from_zero_runs_and_scales_back_to_zero(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    assert pool_nodes(core) == [] and target_size(sim) == 0
    sim.advance(3)
    status, _ = seed.post_pod(sim.url, seed.seed_pod(), strict=True)
    assert status == 201
    created = now(sim)
    sim.settle()

    pending = core.read_namespaced_pod("gpu-pod", "default")
    assert pending.status.phase == "Pending"
    scheduled = next(c for c in pending.status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason, scheduled.message) == (
        "False",
        "Unschedulable",
        UNMATCHED_DEFAULT_POOL,
    )
    assert [(e.type, e.reason, e.message) for e in events_of(core, "gpu-pod")] == [
        ("Warning", "FailedScheduling", UNMATCHED_DEFAULT_POOL)
    ]

    # CA waits for the GPU pod to be 30 s old, and only acts on its 10 s scan.
    sim.advance(26)
    assert with_reason(core, "gpu-pod", "TriggeredScaleUp") == []
    triggered_at = advance_until(
        sim, lambda: bool(with_reason(core, "gpu-pod", "TriggeredScaleUp")), limit=20, step=1
    )
    assert created + 30 <= triggered_at < created + 30 + 10 and triggered_at % 10 == 0
    [triggered] = with_reason(core, "gpu-pod", "TriggeredScaleUp")
    assert (triggered.type, triggered.source.component) == ("Normal", "cluster-autoscaler")
    assert triggered.message == f"pod triggered scale-up: [{{{group_id(sim)} 0->1 (max: 5)}}]"
    assert target_size(sim) == 1

    registered_at = advance_until(sim, lambda: bool(pool_nodes(core)), limit=600, step=1)
    [node] = pool_nodes(core)
    assert not ready(node)
    assert ("node.kubernetes.io/not-ready", "NoSchedule") in [(t.key, t.effect) for t in node.spec.taints]
    assert ("nvidia.com/gpu", "present", "NoSchedule") in [
        (t.key, t.value, t.effect) for t in node.spec.taints
    ]
    assert GPU not in (node.status.allocatable or {})
    sim.settle()
    assert first_of(events_of(core, "gpu-pod"), "FailedScheduling", NOT_READY_NODE)

    ready_at = advance_until(sim, lambda: ready(pool_nodes(core)[0]), limit=600, step=1)
    assert GPU not in pool_nodes(core)[0].status.allocatable
    assert core.read_namespaced_pod("gpu-pod", "default").spec.node_name is None
    assert group_status(core)["health"]["nodeCounts"]["registered"]["total"] == 1

    gpu_at = advance_until(
        sim, lambda: pool_nodes(core)[0].status.allocatable.get(GPU) == "1", limit=900, step=1
    )
    running_at = advance_until(
        sim,
        lambda: core.read_namespaced_pod("gpu-pod", "default").status.phase == "Running",
        limit=900,
        step=5,
    )
    assert created < triggered_at < registered_at < ready_at < gpu_at <= running_at
    assert 4 * 60 <= running_at - created <= 10 * 60

    timeline = events_of(core, "gpu-pod")
    milestones = [
        first_of(timeline, "FailedScheduling", UNMATCHED_DEFAULT_POOL),
        first_of(timeline, "TriggeredScaleUp"),
        first_of(timeline, "FailedScheduling", NOT_READY_NODE),
        first_of(timeline, "FailedScheduling", GPU_NOT_YET_ALLOCATABLE),
        first_of(timeline, "Scheduled"),
        first_of(timeline, "Pulling"),
        first_of(timeline, "Pulled"),
        first_of(timeline, "Created"),
        first_of(timeline, "Started"),
    ]
    assert [timeline.index(m) for m in milestones] == sorted(timeline.index(m) for m in milestones)
    assert [e.reason for e in timeline[-5:]] == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    assert milestones[4].message == f"Successfully assigned default/gpu-pod to {node.metadata.name}"
    pull_took = seconds(milestones[6].event_time) - seconds(milestones[5].event_time)
    assert pull_took >= 30, "a CUDA image takes a while to pull"
    assert milestones[6].message.startswith(
        'Successfully pulled image "nvidia/cuda:12.2.0-base-ubuntu22.04" in '
    )
    assert [(e.source.component, e.source.host) for e in timeline[-4:]] == [
        ("kubelet", node.metadata.name)
    ] * 4

    # Exactly one scale-up: the unready node (NotReady, then Ready without GPUs) counted as upcoming.
    assert len(with_reason(core, "gpu-pod", "TriggeredScaleUp")) == 1
    # executor.go: one "setting group" before the resize and one "size set" after it, each once
    assert [e.count for e in status_events(core, "ScaledUpGroup")] == [1, 1]
    assert len(pool_nodes(core)) == 1 and target_size(sim) == 1

    core.delete_namespaced_pod("gpu-pod", "default")
    deleted_at = now(sim)
    gone_at = advance_until(sim, lambda: not core.list_namespaced_pod("default").items, limit=120, step=1)
    assert gone_at - deleted_at >= 30, "sleep ignores SIGTERM: the full grace period"
    removed_at = advance_until(sim, lambda: not pool_nodes(core), limit=30 * 60, step=5)
    assert 10 * 60 <= removed_at - gone_at <= 10 * 60 + 30
    assert removed_at - triggered_at >= 10 * 60
    node_events = [(e.reason, e.message) for e in events_of(core, node.metadata.name)]
    assert ("ScaleDown", "marked the node as toBeDeleted/unschedulable") in node_events
    assert ("ScaleDown", "nodes removed by cluster autoscaler") in node_events
    assert [e.message for e in status_events(core, "ScaleDownEmpty")] == [
        f'Scale-down: removing empty node "{node.metadata.name}"',
        f"Scale-down: empty node {node.metadata.name} removed",
    ]
    assert target_size(sim) == 0
    assert len(core.list_node().items) == 2
    group = group_status(core)
    assert group["health"]["cloudProviderTarget"] == 0 and group["scaleDown"]["candidates"] == 0


def set_max(sim: world.BackgroundWorld, max_size: int, *, min_size: int = 0, pool: str = GPU_POOL) -> None:
    sim.run(
        lambda: sim.world.registry.set_autoscaling(pool, enabled=True, min_size=min_size, max_size=max_size)
    )


@pytest.mark.parametrize(
    ("pods", "max_size", "reason"),
    [
        pytest.param(
            [pod("plain", selector={"app-type": "gpu-workloads"})],
            5,
            "1 node(s) had untolerated taint {nvidia.com/gpu: present}",
            id="untolerated-taint",
        ),
        pytest.param([gpu_pod("two-gpus", gpus=2)], 5, "1 Insufficient nvidia.com/gpu", id="too-many-gpus"),
        pytest.param(
            [gpu_pod("nowhere", selector={"app-type": "nowhere"})],
            5,
            "1 node(s) didn't match Pod's node affinity/selector",
            id="selector",
        ),
        pytest.param(
            [gpu_pod("first"), gpu_pod("second")], 1, "1 max node group size reached", id="max-size"
        ),
    ],
)
def test_not_trigger_scale_up_says_why_once(
    sim: world.BackgroundWorld, core: client.CoreV1Api, pods: list[dict[str, Any]], max_size: int, reason: str
) -> None:
    set_max(sim, max_size)
    for manifest in pods:
        core.create_namespaced_pod("default", manifest)
    sim.advance(60, step=5)
    sim.advance(120, step=5)  # many more scans: the reason must not be repeated
    told = [e for m in pods for e in with_reason(core, m["metadata"]["name"], "NotTriggerScaleUp")]
    assert [(e.type, e.source.component, e.message, e.count) for e in told] == [
        ("Normal", "cluster-autoscaler", f"pod didn't trigger scale-up: {reason}", 1)
    ]
    triggered = [e for m in pods for e in with_reason(core, m["metadata"]["name"], "TriggeredScaleUp")]
    if max_size == 1:  # both pods asked, the group grew to its max for them, the one left over is told
        assert [e.message for e in triggered] == [
            f"pod triggered scale-up: [{{{group_id(sim)} 0->1 (max: 1)}}]"
        ] * 2
    else:
        assert triggered == [] and target_size(sim) == 0


@pytest.mark.parametrize(("count", "expected"), [(3, 3), (7, 5)])
def test_pods_pending_together_get_one_scale_up_sized_for_them(
    sim: world.BackgroundWorld, core: client.CoreV1Api, count: int, expected: int
) -> None:
    names = [f"job-{i}" for i in range(count)]
    for name in names:
        core.create_namespaced_pod("default", gpu_pod(name))
    sim.advance(40, step=5)
    info = f"pod triggered scale-up: [{{{group_id(sim)} 0->{expected} (max: 5)}}]"
    assert [e.message for n in names for e in with_reason(core, n, "TriggeredScaleUp")] == [info] * count
    assert len(status_events(core, "ScaledUpGroup")) == 2 and target_size(sim) == expected

    sim.advance(600, step=5)
    placed = [core.read_namespaced_pod(n, "default") for n in names]
    running = [p for p in placed if p.status.phase == "Running"]
    assert len(running) == expected == len(pool_nodes(core))
    assert len({p.spec.node_name for p in running}) == expected, "one 1-GPU pod per 1-GPU node"
    assert len(status_events(core, "ScaledUpGroup")) == 2
    for left in (p for p in placed if p.status.phase != "Running"):
        [told] = with_reason(core, left.metadata.name, "NotTriggerScaleUp")
        assert told.message == "pod didn't trigger scale-up: 1 max node group size reached"


def test_stockout_fails_the_scale_up_backs_off_and_retries_once_healed(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    sim.world.set_fault(GPU_POOL, "stockout")
    core.create_namespaced_pod("default", gpu_pod("gpu-pod"))
    failed_at = advance_until(
        sim, lambda: bool(with_reason(core, "gpu-pod", "FailedScaleUp")), limit=60, step=5
    )
    [failed] = with_reason(core, "gpu-pod", "FailedScaleUp")
    assert (failed.type, failed.source.component) == ("Warning", "cluster-autoscaler")
    assert failed.message == (
        "Node scale up in zones local-a associated with this pod failed: GCE out of resources. "
        "Pod is at risk of not being scheduled."
    )
    [group_failed] = status_events(core, "FailedToScaleUpGroup")
    assert group_failed.message.startswith(f"Scale-up failed for group {group_id(sim)}: ")
    scale_up = group_status(core)["scaleUp"]
    assert scale_up["status"] == "Backoff"
    assert scale_up["backoffInfo"]["errorCode"] == "RESOURCE_POOL_EXHAUSTED"
    assert target_size(sim) == 0 and pool_nodes(core) == []
    assert with_reason(core, "gpu-pod", "TriggeredScaleUp") == []

    sim.advance(30, step=5)
    [told] = with_reason(core, "gpu-pod", "NotTriggerScaleUp")
    assert told.message == "pod didn't trigger scale-up: 1 in backoff after failed scale-up"

    sim.world.set_fault(GPU_POOL, None)
    retried_at = advance_until(sim, lambda: bool(with_reason(core, "gpu-pod", "TriggeredScaleUp")), limit=900)
    assert 5 * 60 <= retried_at - failed_at <= 5 * 60 + 15, "CA's first backoff is 5 minutes"
    assert group_status(core)["scaleUp"]["status"] == "InProgress"
    advance_until(
        sim, lambda: core.read_namespaced_pod("gpu-pod", "default").status.phase == "Running", limit=900
    )


def test_stockout_that_persists_doubles_the_backoff(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    sim.world.set_fault(GPU_POOL, "stockout")
    core.create_namespaced_pod("default", gpu_pod("gpu-pod"))
    sim.advance(40 + 5 * 60 + 10 * 60 + 10, step=10)
    [failed] = with_reason(core, "gpu-pod", "FailedScaleUp")
    assert failed.count == 3, "at 40 s, after 5 min backoff, after 10 more"
    assert target_size(sim) == 0


def test_nodes_that_never_register_time_out_after_15_minutes(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    sim.world.set_fault(GPU_POOL, "never_register")
    core.create_namespaced_pod("default", gpu_pod("gpu-pod"))
    triggered_at = advance_until(
        sim, lambda: bool(with_reason(core, "gpu-pod", "TriggeredScaleUp")), limit=60
    )
    assert target_size(sim) == 1
    sim.advance(15 * 60 - 20, step=10)
    assert status_events(core, "ScaleUpTimedOut") == [] and target_size(sim) == 1
    assert group_status(core)["health"]["nodeCounts"]["unregistered"] == 1
    timed_out_at = advance_until(sim, lambda: bool(status_events(core, "ScaleUpTimedOut")), limit=60)
    assert 15 * 60 <= timed_out_at - triggered_at <= 15 * 60 + 10
    [timed_out] = status_events(core, "ScaleUpTimedOut")
    assert (timed_out.type, timed_out.message) == (
        "Warning",
        f"Nodes added to group {group_id(sim)} failed to register within 15m0s",
    )
    assert target_size(sim) == 0 and pool_nodes(core) == []
    group = group_status(core)
    assert group["scaleUp"]["status"] == "Backoff" and group["health"]["nodeCounts"]["unregistered"] == 0
    assert len(with_reason(core, "gpu-pod", "TriggeredScaleUp")) == 1, "no second scale-up while in backoff"
    sim.advance(30, step=10)
    assert [e.message for e in with_reason(core, "gpu-pod", "NotTriggerScaleUp")] == [
        "pod didn't trigger scale-up: 1 in backoff after failed scale-up"
    ]


# -- scale-down ---------------------------------------------------------------------------------
def bring_up_gpu_node(sim: world.BackgroundWorld, core: client.CoreV1Api) -> str:
    """One GPU node via setSize (not a CA scale-up, so no scale-down cooldown), Ready with GPUs."""
    sim.run(lambda: sim.world.registry.set_size(GPU_POOL, 1))
    advance_until(
        sim, lambda: any((n.status.allocatable or {}).get(GPU) for n in pool_nodes(core)), limit=600
    )
    [node] = pool_nodes(core)
    return str(node.metadata.name)


GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
DAEMON_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "name": "nvidia-gpu-device-plugin",
    "uid": "00000000-0000-0000-0000-000000000001",
    "controller": True,
}


@pytest.mark.parametrize(
    ("resident", "kept"),
    [
        pytest.param(
            gpu_pod("pinned", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
            True,
            id="safe-to-evict-false",
        ),
        pytest.param(
            pod("bare", selector={"app-type": "gpu-workloads"}, tolerations=[GPU_TOLERATION]),
            True,
            id="non-daemonset-pod",
        ),
        pytest.param(
            pod(
                "plugin",
                selector={"app-type": "gpu-workloads"},
                tolerations=[GPU_TOLERATION],
                owner=DAEMON_OWNER,
            ),
            False,
            id="daemonset-pod-only",
        ),
        pytest.param(
            pod(
                "kube-proxy",
                selector={"app-type": "gpu-workloads"},
                tolerations=[GPU_TOLERATION],
                annotations={"kubernetes.io/config.mirror": "0123456789abcdef"},
            ),
            False,
            id="mirror-pod-only",
        ),
        pytest.param(None, False, id="empty"),
    ],
)
def test_what_keeps_a_node_from_scale_down(
    sim: world.BackgroundWorld, core: client.CoreV1Api, resident: dict[str, Any] | None, kept: bool
) -> None:
    node = bring_up_gpu_node(sim, core)
    if resident:
        core.create_namespaced_pod("default", resident)
        name = resident["metadata"]["name"]
        advance_until(
            sim, lambda: core.read_namespaced_pod(name, "default").status.phase == "Running", limit=300
        )
        assert core.read_namespaced_pod(name, "default").spec.node_name == node
    sim.advance(30 * 60, step=10)
    assert [n.metadata.name for n in pool_nodes(core)] == ([node] if kept else [])
    assert target_size(sim) == (1 if kept else 0)
    if kept:
        assert group_status(core)["scaleDown"]["candidates"] == 0
        assert status_events(core, "ScaleDownEmpty") == []


def test_min_size_and_scale_down_disabled_keep_empty_nodes(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    set_max(sim, 5, min_size=1)
    advance_until(sim, lambda: len(pool_nodes(core)) == 1, limit=300)
    sim.run(lambda: sim.world.registry.create(spare_gpu_pool()))
    advance_until(sim, lambda: len(pool_nodes(core, "spare-gpu")) == 1, limit=300)
    [spare] = pool_nodes(core, "spare-gpu")
    core.patch_node(
        spare.metadata.name,
        {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}}},
    )
    sim.advance(40 * 60, step=10)
    assert len(pool_nodes(core)) == 1 and target_size(sim) == 1
    assert [n.metadata.name for n in pool_nodes(core, "spare-gpu")] == [spare.metadata.name]
    assert status_events(core, "ScaleDownEmpty") == []
    core.patch_node(
        spare.metadata.name,
        {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": None}}},
    )
    removed_at = advance_until(sim, lambda: not pool_nodes(core, "spare-gpu"), limit=20 * 60, step=10)
    assert removed_at > 0 and len(pool_nodes(core)) == 1


def spare_gpu_pool() -> pools.NodePool:
    spare = world.seed_gpu_pool()
    spare.name, spare.target_size, spare.labels = "spare-gpu", 1, {"app-type": "spare"}
    return spare


# -- pool changes through the GKE API ---------------------------------------------------------------
@pytest.fixture
def gke(sim: world.BackgroundWorld) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1

    return container_v1.ClusterManagerClient(
        transport="rest",
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options=ClientOptions(api_endpoint=sim.url),
    )


POOL_PATH = (
    f"projects/{world.PROJECT}/locations/{world.LOCATION}/clusters/{world.CLUSTER}/nodePools/{GPU_POOL}"
)


def test_set_size_creates_and_removes_nodes(
    sim: world.BackgroundWorld, core: client.CoreV1Api, gke: Any
) -> None:
    gke.set_node_pool_size(request={"name": POOL_PATH, "node_count": 3})
    assert target_size(sim) == 3
    advance_until(sim, lambda: len([n for n in pool_nodes(core) if ready(n)]) == 3, limit=300)
    assert group_status(core)["health"]["cloudProviderTarget"] == 3
    gke.set_node_pool_size(request={"name": POOL_PATH, "node_count": 1})
    sim.settle()
    assert len(pool_nodes(core)) == 1 and target_size(sim) == 1
    gke.set_node_pool_size(request={"name": POOL_PATH, "node_count": 0})
    sim.settle()
    assert pool_nodes(core) == [] and target_size(sim) == 0


def test_lowering_max_shrinks_the_pool_and_caps_later_scale_ups(
    sim: world.BackgroundWorld, core: client.CoreV1Api, gke: Any
) -> None:
    from google.cloud import container_v1

    gke.set_node_pool_size(request={"name": POOL_PATH, "node_count": 3})
    advance_until(sim, lambda: len(pool_nodes(core)) == 3, limit=300)
    autoscaling = container_v1.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=1)
    gke.set_node_pool_autoscaling(request={"name": POOL_PATH, "autoscaling": autoscaling})
    sim.settle()
    assert len(pool_nodes(core)) == 1 and target_size(sim) == 1
    sim.advance(10)  # the status configmap is rewritten on the next scan
    assert group_status(core)["health"]["maxSize"] == 1
    for name in ("a", "b"):
        core.create_namespaced_pod("default", gpu_pod(name, command=["python", "train.py"]))
    sim.advance(300, step=5)
    phases = sorted(core.read_namespaced_pod(n, "default").status.phase for n in ("a", "b"))
    assert phases == ["Pending", "Running"] and len(pool_nodes(core)) == 1
    told = [e.message for n in ("a", "b") for e in with_reason(core, n, "NotTriggerScaleUp")]
    assert told == ["pod didn't trigger scale-up: 1 max node group size reached"]


def test_deleting_the_pool_removes_its_nodes_and_their_pods(
    sim: world.BackgroundWorld, core: client.CoreV1Api, gke: Any
) -> None:
    gke.set_node_pool_size(request={"name": POOL_PATH, "node_count": 2})
    advance_until(
        sim,
        lambda: sum(bool((n.status.allocatable or {}).get(GPU)) for n in pool_nodes(core)) == 2,
        limit=600,
    )
    core.create_namespaced_pod("default", gpu_pod("worker", command=["python", "train.py"]))
    advance_until(
        sim, lambda: core.read_namespaced_pod("worker", "default").status.phase == "Running", limit=300
    )
    gke.delete_node_pool(name=POOL_PATH)
    sim.advance(60, step=5)
    assert pool_nodes(core) == []
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == []
    assert len(core.list_node().items) == 2, "the default pool is untouched"
    names = [g["name"] for g in autoscaler_status(core)["nodeGroups"]]
    assert not any(f"-{GPU_POOL}-grp" in n for n in names)


def test_no_scale_down_within_10_minutes_of_any_scale_up(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    idle = bring_up_gpu_node(sim, core)
    idle_since = now(sim)
    spare = spare_gpu_pool()
    spare.target_size, spare.autoscaling = 0, True
    sim.run(lambda: sim.world.registry.create(spare))
    sim.advance(5 * 60, step=10)
    core.create_namespaced_pod("default", gpu_pod("spare-job", selector={"app-type": "spare"}))
    scaled_up_at = advance_until(
        sim, lambda: bool(with_reason(core, "spare-job", "TriggeredScaleUp")), limit=60
    )
    assert scaled_up_at - idle_since < 10 * 60
    removed_at = advance_until(
        sim, lambda: idle not in [n.metadata.name for n in pool_nodes(core)], limit=1800
    )
    assert removed_at - scaled_up_at >= 10 * 60, "scale-down-delay-after-add holds every group back"
    assert removed_at - scaled_up_at <= 10 * 60 + 10
