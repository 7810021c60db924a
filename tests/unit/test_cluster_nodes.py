"""The one Node model, read from the dicts the API server sends."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.core import cluster_nodes, taints

READY_AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
POOL_LABELS = {"app-type": "gpu-workloads", "cloud.google.com/gke-nodepool": "gpu-pool"}
GPU_TAINT = taints.Taint("nvidia.com/gpu", "present", "NoSchedule")


def test_read_keeps_what_every_reader_needs() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "creationTimestamp": "2026-12-03T07:58:00Z",
            "labels": POOL_LABELS,
            "annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"nvidia.com/gpu": "1", "cpu": "4"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-03T08:00:00Z"}],
        },
    }
    assert cluster_nodes.read(node) == cluster_nodes.Node(
        name="n1",
        ready=True,
        gpus=1,
        pool="gpu-pool",
        created=datetime(2026, 12, 3, 7, 58, tzinfo=UTC),
        ready_since=READY_AT,
        labels=POOL_LABELS,
        annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        taints=(GPU_TAINT,),
    )


def test_read_never_raises_on_odd_shapes() -> None:
    odd = {
        "metadata": {"name": "n", "labels": "junk"},
        "status": {"conditions": "junk", "allocatable": {"x/gpu": "½"}},
    }
    assert cluster_nodes.read(odd) == cluster_nodes.Node("n", ready=False)
    assert cluster_nodes.read({}) == cluster_nodes.Node("", ready=False)


def test_a_not_ready_node_has_no_ready_since() -> None:
    node = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-03T08:00:00Z"}]
        }
    }
    assert not cluster_nodes.is_ready(node)
    assert cluster_nodes.ready_since(node) is None
    assert cluster_nodes.last_seen(node) == READY_AT
