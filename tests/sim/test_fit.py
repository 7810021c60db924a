"""The scheduler's Filter/Score rules produce the exact FailedScheduling text a real cluster prints."""

from __future__ import annotations

from typing import Any

import pytest

from sim.cluster import fit, messages

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def make_node(
    name: str,
    *,
    allocatable: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def make_pod(
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "cuda", "resources": resources}]}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec, "status": {"phase": phase}}


def gpu_node(name: str, gpus: str = "1", **kwargs: Any) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": gpus}
    return make_node(name, allocatable=allocatable, **kwargs)


def message_for(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    fits = {n["metadata"]["name"]: fit.filter_node(pod, n, used={}) for n in nodes}
    return fit.failed_scheduling_message(fits)


# -- exact FailedScheduling messages (reference §4) -------------------------------------------------


def test_untolerated_gpu_taint_on_three_nodes() -> None:
    nodes = [gpu_node(f"gpu-{i}", taints=[GPU_TAINT]) for i in range(3)]
    pod = make_pod(limits={"nvidia.com/gpu": "1"})
    assert message_for(pod, nodes) == (
        "0/3 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: present}. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_insufficient_gpu_on_one_node() -> None:
    pod = make_pod(limits={"nvidia.com/gpu": "1"})
    assert message_for(pod, [make_node("cpu-1")]) == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_empty_taint_value_prints_as_blank() -> None:
    node = make_node("n", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    assert message_for(make_pod(), [node]) == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: }. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_mixed_resource_and_affinity_failures() -> None:
    pod = make_pod(limits={"nvidia.com/gpu": "1"}, node_selector={"pool": "gpu"})
    nodes = [
        gpu_node("gpu-1", gpus="0", labels={"pool": "gpu"}),
        make_node("cpu-1", labels={"pool": "cpu"}),
        make_node("cpu-2"),
    ]
    assert message_for(pod, nodes) == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )


def test_no_nodes_at_all() -> None:
    assert (
        fit.failed_scheduling_message({})
        == messages.NO_NODES_AVAILABLE
        == "no nodes available to schedule pods"
    )


def test_message_refuses_when_a_node_fits() -> None:
    with pytest.raises(ValueError):
        fit.failed_scheduling_message({"n": fit.FITS})


def test_histogram_sorts_counts_as_strings() -> None:
    fits = {f"n{i}": fit.NodeFit((messages.NODE_AFFINITY_MISMATCH,), resolvable=False) for i in range(10)}
    fits |= {f"m{i}": fit.NodeFit(("Insufficient cpu",), resolvable=True) for i in range(2)}
    assert fit.failed_scheduling_message(fits) == (
        "0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu. "
        "preemption: 0/12 nodes are available: 10 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


# -- the GKE scale-from-zero timeline ------------------------------------------------------------

GKE_GPU_POD = make_pod(
    limits={"nvidia.com/gpu": "1"},
    tolerations=[GPU_TOLERATION],
    node_selector={"app-type": "gpu-workloads"},
)
GPU_POOL_LABELS = {"app-type": "gpu-workloads", "cloud.google.com/gke-accelerator": "nvidia-l4"}


def test_gke_only_cpu_nodes() -> None:
    nodes = [make_node("gke-default-1"), make_node("gke-default-2")]
    assert message_for(GKE_GPU_POD, nodes) == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_gke_new_gpu_node_not_ready_yet() -> None:
    nodes = [
        make_node("gke-default-1"),
        make_node("gke-default-2"),
        make_node("gke-gpu-1", labels=GPU_POOL_LABELS, taints=[GPU_TAINT, NOT_READY_TAINT]),
    ]
    assert message_for(GKE_GPU_POD, nodes) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_gke_gpu_node_ready_before_device_plugin() -> None:
    nodes = [
        make_node("gke-default-1"),
        make_node("gke-default-2"),
        make_node("gke-gpu-1", labels=GPU_POOL_LABELS, taints=[GPU_TAINT]),
    ]
    assert message_for(GKE_GPU_POD, nodes) == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )


def test_gke_gpu_node_with_gpu_allocatable_is_picked() -> None:
    nodes = [
        make_node("gke-default-1"),
        gpu_node("gke-gpu-1", labels=GPU_POOL_LABELS, taints=[GPU_TAINT]),
    ]
    assert fit.pick_node(GKE_GPU_POD, nodes, {}) == "gke-gpu-1"
    assert fit.pick_node(GKE_GPU_POD, nodes, {"gke-gpu-1": {"nvidia.com/gpu": 1, "pods": 1}}) is None


# -- filter plugin order and resolvability ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        (make_pod(), make_node("n", unschedulable=True), fit.NodeFit((messages.NODE_UNSCHEDULABLE,), False)),
        (
            make_pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
            make_node("n", unschedulable=True),
            fit.FITS,
        ),
        (
            # NodeUnschedulable runs before TaintToleration and stops the chain
            make_pod(),
            make_node("n", unschedulable=True, taints=[GPU_TAINT]),
            fit.NodeFit((messages.NODE_UNSCHEDULABLE,), False),
        ),
        (
            {**make_pod(), "spec": {**make_pod()["spec"], "nodeName": "other"}},
            make_node("n"),
            fit.NodeFit(("node(s) didn't match the requested node name",), False),
        ),
        (
            # taints come before affinity, and only the first untolerated taint is reported
            make_pod(node_selector={"x": "y"}),
            make_node("n", taints=[{"key": "a", "value": "1", "effect": "NoExecute"}, GPU_TAINT]),
            fit.NodeFit(("node(s) had untolerated taint {a: 1}",), False),
        ),
        (
            make_pod(),
            make_node("n", taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]),
            fit.FITS,
        ),
        (
            # affinity fails before resources are even looked at
            make_pod(requests={"cpu": "100"}, node_selector={"x": "y"}),
            make_node("n"),
            fit.NodeFit((messages.NODE_AFFINITY_MISMATCH,), False),
        ),
        (
            make_pod(requests={"cpu": "5", "memory": "17Gi"}, limits={"nvidia.com/gpu": "2"}),
            gpu_node("n"),
            fit.NodeFit(("Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu"), True),
        ),
        (
            make_pod(requests={"cpu": "4", "memory": "16Gi"}),
            make_node("n"),
            fit.FITS,
        ),
    ],
)
def test_filter_node(pod: dict[str, Any], node: dict[str, Any], expected: fit.NodeFit) -> None:
    assert fit.filter_node(pod, node, used={}) == expected


def test_filter_node_counts_used_resources_and_pods() -> None:
    node = make_node("n", allocatable={"cpu": "2", "memory": "4Gi", "pods": "3", "ephemeral-storage": "10Gi"})
    pod = make_pod(requests={"cpu": "1500m", "ephemeral-storage": "8Gi"})
    used = {"cpu": 1000, "memory": 0, "pods": 3, "ephemeral-storage": 4 * 2**30}
    assert fit.filter_node(pod, node, used=used).reasons == (
        "Too many pods",
        "Insufficient cpu",
        "Insufficient ephemeral-storage",
    )
    assert fit.filter_node(pod, node, used={"cpu": 500, "pods": 2}).fits


def test_best_effort_pod_only_checks_pod_count() -> None:
    node = make_node("n", allocatable={"pods": "1"})
    assert fit.filter_node(make_pod(), node, used={}).fits
    assert fit.filter_node(make_pod(), node, used={"pods": 1}).reasons == ("Too many pods",)


def test_template_node_without_used() -> None:
    template = gpu_node("gpu-pool-template", taints=[GPU_TAINT])
    assert fit.filter_node(GKE_GPU_POD, template).reasons == (messages.NODE_AFFINITY_MISMATCH,)
    template["metadata"]["labels"] = GPU_POOL_LABELS
    assert fit.filter_node(GKE_GPU_POD, template).fits


# -- tolerations ----------------------------------------------------------------------------------

TAINT_NS = {"key": "k", "value": "v", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, TAINT_NS, True),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, TAINT_NS, True),  # operator defaults to Equal
        ({"key": "k", "operator": "Equal", "value": "w", "effect": "NoSchedule"}, TAINT_NS, False),
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, TAINT_NS, True),
        ({"key": "other", "operator": "Exists"}, TAINT_NS, False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, TAINT_NS, False),
        ({"key": "k", "operator": "Exists"}, TAINT_NS, True),  # empty effect matches all effects
        ({"operator": "Exists"}, TAINT_NS, True),  # empty key with Exists matches everything
        ({"operator": "Exists", "effect": "NoExecute"}, TAINT_NS, False),
        ({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True),  # both values empty
        ({"key": "k", "operator": "Equal"}, TAINT_NS, False),
        ({"key": "k", "operator": "Gt", "value": "1"}, TAINT_NS, False),  # unknown operator tolerates nothing
    ],
)
def test_tolerates(toleration: dict[str, str], taint: dict[str, str], expected: bool) -> None:
    assert fit.tolerates(toleration, taint) is expected


def test_first_untolerated_taint() -> None:
    taints = [
        {"key": "soft", "effect": "PreferNoSchedule"},
        GPU_TAINT,
        NOT_READY_TAINT,
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    ]
    assert fit.first_untolerated_taint([GPU_TOLERATION], taints) == NOT_READY_TAINT
    assert fit.first_untolerated_taint([], taints) == GPU_TAINT
    assert fit.first_untolerated_taint([{"operator": "Exists"}], taints) is None
    assert fit.first_untolerated_taint([], taints, effects=("NoExecute",)) == taints[3]


# -- node selector and required node affinity -------------------------------------------------------

LABELS = {"zone": "us-central1-b", "gpus": "4", "gpu": "true"}


def affinity_pod(*terms: dict[str, Any]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": list(terms)}
    return make_pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (expr("zone", "In", "us-central1-a", "us-central1-b"), True),
        (expr("zone", "In", "us-central1-a"), False),
        (expr("missing", "In", "x"), False),
        (expr("zone", "In"), False),  # In needs values
        (expr("zone", "NotIn", "us-central1-a"), True),
        (expr("zone", "NotIn", "us-central1-b"), False),
        (expr("missing", "NotIn", "x"), True),
        (expr("gpu", "Exists"), True),
        (expr("missing", "Exists"), False),
        (expr("gpu", "Exists", "true"), False),  # Exists takes no values
        (expr("missing", "DoesNotExist"), True),
        (expr("gpu", "DoesNotExist"), False),
        (expr("gpus", "Gt", "3"), True),
        (expr("gpus", "Gt", "4"), False),
        (expr("gpus", "Lt", "5"), True),
        (expr("gpus", "Lt", "4"), False),
        (expr("gpus", "Gt", "1", "2"), False),  # Gt takes exactly one value
        (expr("gpus", "Gt", "x"), False),
        (expr("zone", "Gt", "1"), False),  # label not an integer
        (expr("missing", "Lt", "1"), False),
        (expr("zone", "Matches", "x"), False),
    ],
)
def test_affinity_operators(requirement: dict[str, Any], expected: bool) -> None:
    node = make_node("node-a", labels=LABELS)
    assert fit.matches_node_selector(affinity_pod({"matchExpressions": [requirement]}), node) is expected


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ([{"matchExpressions": [expr("gpu", "Exists"), expr("zone", "In", "nowhere")]}], False),  # ANDed
        (
            [
                {"matchExpressions": [expr("zone", "In", "nowhere")]},
                {"matchExpressions": [expr("gpu", "Exists")]},
            ],
            True,
        ),
        ([{}], False),  # an empty term matches nothing
        ([], False),
        ([{"matchFields": [expr("metadata.name", "In", "node-a")]}], True),
        ([{"matchFields": [expr("metadata.name", "NotIn", "node-a")]}], False),
        (
            [
                {
                    "matchFields": [expr("metadata.name", "In", "node-a")],
                    "matchExpressions": [expr("gpu", "DoesNotExist")],
                }
            ],
            False,
        ),
    ],
)
def test_affinity_terms(terms: list[dict[str, Any]], expected: bool) -> None:
    node = make_node("node-a", labels=LABELS)
    assert fit.matches_node_selector(affinity_pod(*terms), node) is expected


def test_node_selector_and_affinity_are_both_required() -> None:
    node = make_node("node-a", labels=LABELS)
    pod = affinity_pod({"matchExpressions": [expr("gpu", "Exists")]})
    assert fit.matches_node_selector(pod, node)
    pod["spec"]["nodeSelector"] = {"zone": "us-central1-b"}
    assert fit.matches_node_selector(pod, node)
    pod["spec"]["nodeSelector"] = {"zone": "us-central1-a"}
    assert not fit.matches_node_selector(pod, node)
    assert not fit.matches_node_selector(make_pod(node_selector={"gpu": "true", "x": "y"}), node)
    assert fit.matches_node_selector(make_pod(), make_node("bare"))


# -- requests, allocatable and quantities ------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "quantity", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1", 1000),
        ("cpu", "0.5", 500),
        ("cpu", "1.0001", 1001),  # MilliValue rounds up
        ("cpu", 2, 2000),
        ("memory", "1Gi", 2**30),
        ("memory", "1G", 10**9),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129 * 10**6),
        ("memory", "123Mi", 123 * 2**20),
        ("memory", "1.5Ki", 1536),
        ("memory", "1E", 10**18),
        ("memory", "100n", 1),  # Value rounds up
        ("nvidia.com/gpu", "1", 1),
        ("pods", "110", 110),
    ],
)
def test_to_base_units(resource: str, quantity: str | int, expected: int) -> None:
    assert fit.to_base_units(resource, quantity) == expected


@pytest.mark.parametrize("bad", ["", "1Gib", "abc", "1 Gi", "1e", "--1"])
def test_bad_quantities_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        fit.parse_quantity(bad)


def test_pod_requests_sums_containers_defaults_to_limits_and_adds_overhead() -> None:
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                },
                {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "c"},
            ],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
            "overhead": {"cpu": "10m", "memory": "1Mi"},
        }
    }
    assert fit.pod_requests(pod) == {
        "cpu": 2000 + 10,
        "memory": 2**30 + 2**20,
        "nvidia.com/gpu": 1,
        "pods": 1,
    }


def test_pod_requests_with_sidecar_init_containers() -> None:
    pod = {
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "2"}}},
            ],
        }
    }
    # the sidecar runs beside `setup` (2.5) and beside the main container (1.5); the peak wins
    assert fit.pod_requests(pod) == {"cpu": 2500, "pods": 1}


def test_node_allocatable_defaults() -> None:
    assert fit.node_allocatable({"status": {}}) == {"pods": 110}
    node = gpu_node("n")
    assert fit.node_allocatable(node) == {"cpu": 4000, "memory": 16 * 2**30, "nvidia.com/gpu": 1, "pods": 110}


def test_used_resources_skips_terminal_pods() -> None:
    pods = [
        make_pod(requests={"cpu": "1"}, phase="Running"),
        make_pod(requests={"cpu": "2"}, limits={"nvidia.com/gpu": "1"}, phase="Pending"),
        make_pod(requests={"cpu": "4"}, phase="Succeeded"),
        make_pod(requests={"cpu": "8"}, phase="Failed"),
    ]
    assert fit.used_resources(pods) == {"cpu": 3000, "nvidia.com/gpu": 1, "pods": 2}
    assert fit.used_resources([]) == {}


# -- scoring -----------------------------------------------------------------------------------------


def test_pick_node_prefers_least_allocated_then_name() -> None:
    nodes = [make_node("c"), make_node("b"), make_node("a", taints=[GPU_TAINT])]
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    assert fit.pick_node(pod, nodes, {}) == "b"  # a is tainted; b and c tie, b wins by name
    assert fit.pick_node(pod, nodes, {"b": {"cpu": 2000, "pods": 1}}) == "c"
    assert fit.pick_node(pod, nodes, {"b": {"cpu": 3500}, "c": {"cpu": 3500}}) is None
    assert fit.pick_node(pod, [], {}) is None


def test_pick_node_scores_after_placement_on_bigger_nodes() -> None:
    small = make_node("small", allocatable={"cpu": "2", "memory": "4Gi"})
    big = make_node("big", allocatable={"cpu": "16", "memory": "64Gi"})
    pod = make_pod(requests={"cpu": "1", "memory": "2Gi"})
    assert fit.pick_node(pod, [small, big], {"big": {"cpu": 12000, "memory": 48 * 2**30}}) == "small"
    assert fit.pick_node(pod, [small, big], {}) == "big"


def test_least_allocated_score() -> None:
    allocatable = {"cpu": 4000, "memory": 1000}
    assert fit.least_allocated_score({"cpu": 1000, "memory": 500}, allocatable) == (75 + 50) // 2
    assert fit.least_allocated_score({"cpu": 5000}, allocatable) == (0 + 100) // 2
    assert fit.least_allocated_score({}, {}) == 0
