"""Reading API dicts as workloads and lifecycle observations: pure, table-driven, shaped like real objects."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core import labels, lifecycle, models, podspec, starts, workloads

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PROFILE = models.GpuProfile(
    name="t4",
    tolerations=(models.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
    node_selector=(("app-type", "gpu-workloads"),),
)
OWNER = models.Owner(user_id="U01ABC", user_name="Alice", team_id="T1")
REQUEST = models.RunRequest(image="pytorch/pytorch:2.3.0", gpus=1, text="run pytorch/pytorch:2.3.0")


def stamp(seconds: int) -> str:
    return podspec.format_time(T0 + timedelta(seconds=seconds))


def built_pod(**status: Any) -> dict[str, Any]:
    pod = podspec.build_pod(
        REQUEST,
        PROFILE,
        OWNER,
        now=T0,
        lease=timedelta(hours=4),
        channel="C1",
        thread_ts="17.5",
        namespace="gpu",
    )
    pod["metadata"].update(uid="u-1", resourceVersion="42", creationTimestamp=stamp(0))
    pod["status"] = status
    return pod


def test_from_pod_reads_back_everything_build_pod_wrote() -> None:
    workload = workloads.from_pod(built_pod(phase="Running"))
    assert workload == workloads.Workload(
        name=podspec.pod_name(REQUEST, OWNER, channel="C1", thread_ts="17.5"),
        namespace="gpu",
        uid="u-1",
        owner_id="U01ABC",
        requester_name="Alice",
        profile="t4",
        channel="C1",
        thread_ts="17.5",
        lease_end=T0 + timedelta(hours=4),
        requested_at=T0,
        gpus=1,
        phase="Running",
        node="",
        command="/gpu run pytorch/pytorch:2.3.0",
        deletion_requested=False,
        image="pytorch/pytorch:2.3.0",
        created_at=T0,
        resource_version="42",
        audit=podspec.audit_json([podspec.run_audit_entry(REQUEST, OWNER, PROFILE, T0)]),
    )
    assert workload.key == f"gpu/{workload.name}"


def test_from_pod_sees_node_and_deletion() -> None:
    pod = built_pod()
    pod["spec"]["nodeName"] = "gke-demo-gpu-pool-1"
    pod["metadata"]["deletionTimestamp"] = stamp(60)
    workload = workloads.from_pod(pod)
    assert workload is not None
    assert (workload.node, workload.deletion_requested, workload.phase) == (
        "gke-demo-gpu-pool-1",
        True,
        "Pending",
    )


def test_from_pod_reads_how_its_container_waits_to_start_and_since_when() -> None:
    pod = built_pod(
        phase="Pending",
        startTime=stamp(30),
        containerStatuses=[waiting("ImagePullBackOff", 'Back-off pulling image "foo:bar"')],
    )
    workload = workloads.from_pod(pod)
    assert workload is not None
    assert workload.start == starts.Start(
        "ImagePullBackOff", 'Back-off pulling image "foo:bar"', T0 + timedelta(seconds=30)
    )
    running = workloads.from_pod(built_pod(phase="Running"))
    assert running is not None and running.start == starts.Start()


@pytest.mark.parametrize(
    "pod",
    [
        {},
        {"metadata": {"name": "web", "labels": {"app": "web"}}},
        {"metadata": {"name": "x", "labels": {labels.MANAGED_BY_LABEL: "helm"}}},
        {"metadata": None, "spec": "garbage"},
    ],
)
def test_from_pod_ignores_pods_gpubot_does_not_manage(pod: dict[str, Any]) -> None:
    assert workloads.from_pod(pod) is None


def test_from_pod_survives_a_managed_pod_with_odd_fields() -> None:
    pod = {
        "metadata": {"name": "odd", "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY_VALUE}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "lots"}}}, "junk"]},
        "status": None,
    }
    workload = workloads.from_pod(pod)
    assert workload is not None
    assert (workload.gpus, workload.phase, workload.lease_end, workload.image) == (0, "Pending", None, "")


@pytest.mark.parametrize(
    ("resources", "gpus"),
    [
        ({"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}, 2),
        ({"requests": {"nvidia.com/gpu": 1}}, 1),
        ({"limits": {"amd.com/gpu": "1", "cpu": "4"}}, 1),
        ({"limits": {"cpu": "4"}}, 0),
        ({}, 0),
    ],
)
def test_container_gpus(resources: dict[str, Any], gpus: int) -> None:
    assert workloads.container_gpus({"resources": resources}) == gpus


# -- observe_pod ------------------------------------------------------------------------------------


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {
        "name": "workload",
        "restartCount": 0,
        "state": {"waiting": {"reason": reason, "message": message}},
    }


def terminated(reason: str, code: int, *, last: bool = False) -> dict[str, Any]:
    state = {"terminated": {"reason": reason, "exitCode": code, "finishedAt": stamp(300)}}
    if last:
        return {"restartCount": 1, "state": {"running": {"startedAt": stamp(310)}}, "lastState": state}
    return {"restartCount": 0, "state": state}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"phase": "Pending"}, lifecycle.PodSeen(at=T0, phase="Pending")),
        (
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(200)}],
                "containerStatuses": [waiting("ErrImagePull", 'pull "x" failed')],
            },
            lifecycle.PodSeen(
                at=T0 + timedelta(seconds=200),
                phase="Pending",
                waiting_reason="ErrImagePull",
                waiting_message='pull "x" failed',
            ),
        ),
        (
            {"phase": "Failed", "containerStatuses": [terminated("OOMKilled", 137)]},
            lifecycle.PodSeen(
                at=T0 + timedelta(seconds=300), phase="Failed", terminated_reason="OOMKilled", exit_code=137
            ),
        ),
        (
            {"phase": "Running", "containerStatuses": [terminated("OOMKilled", 137, last=True)]},
            lifecycle.PodSeen(
                at=T0 + timedelta(seconds=310),
                phase="Running",
                terminated_reason="OOMKilled",
                exit_code=137,
                restarts=1,
            ),
        ),
        (
            {"phase": "Succeeded", "containerStatuses": [terminated("Completed", 0)]},
            lifecycle.PodSeen(
                at=T0 + timedelta(seconds=300), phase="Succeeded", terminated_reason="Completed", exit_code=0
            ),
        ),
    ],
)
def test_observe_pod(status: dict[str, Any], expected: lifecycle.PodSeen) -> None:
    assert workloads.observe_pod(built_pod(**status)) == expected


def test_observe_pod_node_and_deletion() -> None:
    pod = built_pod(phase="Running", startTime=stamp(100))
    pod["spec"]["nodeName"] = "n1"
    pod["metadata"]["deletionTimestamp"] = stamp(500)
    assert workloads.observe_pod(pod) == lifecycle.PodSeen(
        at=T0 + timedelta(seconds=100), phase="Running", node="n1"
    )
    gone = workloads.observe_pod(pod, deleted=True)
    assert (gone.deleted, gone.at) == (True, T0 + timedelta(seconds=500))


def test_observe_pod_takes_an_explicit_time_and_needs_one_without_timestamps() -> None:
    later = T0 + timedelta(hours=1)
    assert workloads.observe_pod(built_pod(), at=later).at == later
    with pytest.raises(ValueError, match="pass `at`"):
        workloads.observe_pod({"status": {"phase": "Pending"}})
    assert workloads.observe_pod({"status": {"phase": "Pending"}}, at=later).at == later


# -- observe_event ----------------------------------------------------------------------------------

SCALE_UP = "pod triggered scale-up: [{https://x/instanceGroups/gke-demo-gpu-pool-grp 0->1 (max: 5)}]"


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            {
                "reason": "TriggeredScaleUp",
                "message": SCALE_UP,
                "type": "Normal",
                "firstTimestamp": stamp(40),
                "lastTimestamp": stamp(40),
                "eventTime": None,
            },
            lifecycle.EventSeen(T0 + timedelta(seconds=40), "TriggeredScaleUp", SCALE_UP),
        ),
        (
            {
                "reason": "FailedScheduling",
                "message": "0/2 nodes are available",
                "type": "Warning",
                "eventTime": "2026-01-05T09:00:05.123456Z",
                "lastTimestamp": stamp(65),
                "count": 2,
            },
            lifecycle.EventSeen(
                T0 + timedelta(seconds=65), "FailedScheduling", "0/2 nodes are available", "Warning"
            ),
        ),
        (
            {"reason": "Pulling", "note": "Pulling image", "eventTime": "2026-01-05T09:01:00.500000Z"},
            lifecycle.EventSeen(T0 + timedelta(seconds=60, microseconds=500000), "Pulling", "Pulling image"),
        ),
        (
            {"reason": "Started", "metadata": {"creationTimestamp": stamp(9)}},
            lifecycle.EventSeen(T0 + timedelta(seconds=9), "Started", ""),
        ),
        ({"message": "no reason", "lastTimestamp": stamp(1)}, None),
        ({"reason": "Timeless"}, None),
    ],
)
def test_observe_event(event: dict[str, Any], expected: lifecycle.EventSeen | None) -> None:
    assert workloads.observe_event(event) == expected


def test_event_subject_core_and_events_api() -> None:
    core = {"involvedObject": {"kind": "Pod", "namespace": "gpu", "name": "p", "uid": "u"}}
    new = {"regarding": {"kind": "Node", "name": "n"}}
    assert workloads.event_subject(core) == workloads.EventSubject("Pod", "gpu", "p", "u")
    assert workloads.event_subject(new) == workloads.EventSubject("Node", "", "n", "")
    assert workloads.event_subject({"involvedObject": {}}) is None


# -- observe_node -----------------------------------------------------------------------------------


def node(pool_labels: dict[str, str], *, ready: str, gpus: str | None, beat: int = 0) -> dict[str, Any]:
    allocatable = {"cpu": "3920m"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {})
    return {
        "metadata": {"name": "n1", "labels": pool_labels, "creationTimestamp": stamp(100)},
        "status": {
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": stamp(100)},
                {
                    "type": "Ready",
                    "status": ready,
                    "lastTransitionTime": stamp(130),
                    "lastHeartbeatTime": stamp(beat),
                },
            ],
        },
    }


BORN = {"created": T0 + timedelta(seconds=100)}
READY = BORN | {"ready_since": T0 + timedelta(seconds=130)}
"""When the test node was created and turned Ready: its creation stamp and its Ready transition."""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            node({labels.GKE_NODEPOOL_LABEL: "gpu-pool"}, ready="False", gpus=None),
            lifecycle.NodeSeen(
                "n1", ready=False, gpus=0, pool="gpu-pool", **BORN, at=T0 + timedelta(seconds=130)
            ),
        ),
        (
            node({labels.GKE_NODEPOOL_LABEL: "gpu-pool"}, ready="True", gpus="1", beat=250),
            lifecycle.NodeSeen(
                "n1", ready=True, gpus=1, pool="gpu-pool", **READY, at=T0 + timedelta(seconds=250)
            ),
        ),
        (
            node({labels.EKS_NODEGROUP_LABEL: "gpu-ng"}, ready="True", gpus="4"),
            lifecycle.NodeSeen(
                "n1", ready=True, gpus=4, pool="gpu-ng", **READY, at=T0 + timedelta(seconds=130)
            ),
        ),
        (
            node({}, ready="Unknown", gpus="0"),
            lifecycle.NodeSeen("n1", ready=False, gpus=0, pool="", **BORN, at=T0 + timedelta(seconds=130)),
        ),
    ],
)
def test_observe_node(raw: dict[str, Any], expected: lifecycle.NodeSeen) -> None:
    assert workloads.observe_node(raw) == dataclasses.replace(expected, labels=raw["metadata"]["labels"])


def test_observe_node_feeds_the_lifecycle() -> None:
    """The converters' output drives the state machine as hand-written observations do."""
    progress = lifecycle.Progress(created=T0)
    seen: list[lifecycle.Observation] = [
        lifecycle.EventSeen(T0 + timedelta(seconds=40), "TriggeredScaleUp", SCALE_UP),
        workloads.observe_node(
            node({labels.GKE_NODEPOOL_LABEL: "gpu-pool"}, ready="True", gpus="1", beat=250)
        ),
    ]
    for observation in seen:
        progress, _ = lifecycle.advance(progress, observation)
    assert progress.at(lifecycle.Step.NODE_READY) == T0 + timedelta(seconds=130)  # its Ready transition
    assert progress.at(lifecycle.Step.GPU_READY) == T0 + timedelta(seconds=250)


def test_nodes_carry_their_labels_to_price_their_pool() -> None:
    pool_labels = {labels.GKE_NODEPOOL_LABEL: "gpu-pool", "app-type": "gpu-workloads"}
    seen = workloads.observe_node(node(pool_labels, ready="True", gpus="1"))
    assert seen.labels == pool_labels and seen.pool == "gpu-pool"


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("default/training-1", "training-1"),
        ("gpu-jobs/a", "a"),
        ("", None),
        ("default/", None),
        ("/training-1", None),
        ("training-1", None),
        ("default/training-1/x", None),
        ("default/Training", None),
        ("default/a.b", None),
    ],
)
def test_name_in_key_takes_only_a_namespace_and_a_name(key: str, name: str | None) -> None:
    assert workloads.name_in_key(key) == name
