"""Scheduling gates and the minimal Kueue (v0.19.2) of the embedded cluster, through the real kubernetes
client (CoreV1Api, CustomObjectsApi, raw visibility GETs) and the real kubectl, on a manual clock."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from sim.cluster import config, world
from tests.sim.test_kubectl import Kubectl

NS = "gpubot-workloads"
GROUP, V2, V1 = "kueue.x-k8s.io", "v1beta2", "v1beta1"
GPU = "nvidia.com/gpu"
GATE = "kueue.x-k8s.io/admission"
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def gpu_pod(
    name: str,
    *,
    queue: str | None = "gpu-queue",
    gates: list[str] | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "nvidia/cuda:12.2.0-base-ubuntu22.04",
        "command": command or ["sleep", "3600"],
        "resources": {"limits": {GPU: "1"}},
        "securityContext": RESTRICTED,
    }
    metadata: dict[str, Any] = {"name": name}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@pytest.fixture
def kueue_sim() -> Iterator[world.BackgroundWorld]:
    cfg = world.WorldConfig(timings=config.instant_cloud(), kueue_gpu_quota=2)
    with world.BackgroundWorld(cfg) as running:
        yield running


@pytest.fixture
def kapi(kueue_sim: world.BackgroundWorld) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=kueue_sim.url)) as api:
        yield api


def scheduled_condition(core: client.CoreV1Api, name: str, namespace: str = NS) -> client.V1PodCondition:
    pod = core.read_namespaced_pod(name, namespace)
    return next(c for c in pod.status.conditions if c.type == "PodScheduled")


def workloads(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    """The namespace's workloads by the name of the pod that owns each (or their own, for one without)."""
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, V2, NS, "workloads")
    return {owner_name(w): w for w in listed["items"]}


def owner_name(wl: dict[str, Any]) -> str:
    owners = wl["metadata"].get("ownerReferences") or []
    return str(owners[0]["name"] if owners else wl["metadata"]["name"])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def get_raw(api: client.ApiClient, url: str, path: str) -> tuple[int, dict[str, Any]]:
    response = api.call_api("GET", url + path)
    response.read()
    return response.status, json.loads(response.data)


def gpu_nodes(sim: world.BackgroundWorld) -> list[str]:
    return [n["metadata"]["name"] for n in sim.nodes() if "gpu-pool" in n["metadata"]["name"]]


# -- scheduling gates, without Kueue ------------------------------------------------------------------------


def test_a_gated_pod_waits_unscheduled_and_the_autoscaler_leaves_it_alone(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, gpu_pod("gated", queue=None, gates=["example.com/quota"]))
    sim.advance(120)
    condition = scheduled_condition(core, "gated")
    assert (condition.status, condition.reason, condition.message) == (
        "False",
        "SchedulingGated",
        "Scheduling is blocked due to non-empty scheduling gates",
    )
    assert core.read_namespaced_pod("gated", NS).spec.node_name is None
    assert gpu_nodes(sim) == []
    reasons = {e.reason for e in core.list_namespaced_event(NS).items}
    assert not reasons & {"FailedScheduling", "TriggeredScaleUp", "NotTriggerScaleUp"}

    core.patch_namespaced_pod("gated", NS, {"spec": {"schedulingGates": None}})
    sim.advance(600)
    assert core.read_namespaced_pod("gated", NS).spec.node_name in gpu_nodes(sim)
    assert "TriggeredScaleUp" in {e.reason for e in core.list_namespaced_event(NS).items}


def test_gates_are_refused_as_the_api_server_refuses_them(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, gpu_pod("gated", queue=None, gates=["example.com/a"]))
    with pytest.raises(client.ApiException) as added:
        core.patch_namespaced_pod(
            "gated", NS, {"spec": {"schedulingGates": [{"name": "example.com/a"}, {"name": "x"}]}}
        )
    assert added.value.status == 422
    assert json.loads(added.value.body)["message"] == (
        'Pod "gated" is invalid: spec.schedulingGates[1].name: Forbidden: '
        "only deletion is allowed, but found new scheduling gate 'x'"
    )
    repeated = [{"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "x"}, {"name": "x"}]}]
    with pytest.raises(client.ApiException) as new_twice:  # one error per new name, at its last index
        core.patch_namespaced_pod("gated", NS, repeated)
    causes = json.loads(new_twice.value.body)["details"]["causes"]
    assert [c["field"] for c in causes if "only deletion" in c["message"]] == ["spec.schedulingGates[1].name"]
    with pytest.raises(client.ApiException) as twice:
        core.create_namespaced_pod(NS, gpu_pod("twice", queue=None, gates=["example.com/a", "example.com/a"]))
    assert (
        'spec.schedulingGates[1]: Duplicate value: "example.com/a"' in json.loads(twice.value.body)["message"]
    )
    bound = gpu_pod("bound", queue=None, gates=["example.com/a"])
    bound["spec"]["nodeName"] = "somewhere"
    with pytest.raises(client.ApiException) as named:
        core.create_namespaced_pod(NS, bound)
    assert (
        "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
        in named.value.body
    )


def test_a_gated_pod_may_gain_node_selector_entries_but_not_change_them(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, gpu_pod("gated", queue=None, gates=["example.com/a"]))
    core.patch_namespaced_pod("gated", NS, {"spec": {"nodeSelector": {"a": "b"}}})
    with pytest.raises(client.ApiException) as changed:
        core.patch_namespaced_pod("gated", NS, {"spec": {"nodeSelector": {"a": "z"}}})
    assert (
        'spec.nodeSelector: Invalid value: map[string]string{"a":"z"}: '
        "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
    ) in json.loads(changed.value.body)["message"]
    with pytest.raises(client.ApiException) as removed:
        core.patch_namespaced_pod("gated", NS, [{"op": "remove", "path": "/spec/nodeSelector"}])
    assert "spec.nodeSelector: Invalid value: map[string]string(nil): only additions" in removed.value.body


# -- Kueue -------------------------------------------------------------------------------------------------


def test_workloads_are_admitted_in_order_within_the_quota(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    core = client.CoreV1Api(kapi)
    for name in ("a", "b", "c"):
        core.create_namespaced_pod(NS, gpu_pod(name))
        kueue_sim.advance(1)
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(NS).items}
    assert pods["c"].metadata.labels["kueue.x-k8s.io/managed"] == "true"
    wls = workloads(kapi)
    uid = pods["a"].metadata.uid
    assert (
        wls["a"]["metadata"]["name"] == "pod-a-" + hashlib.sha1(f"Pod\n\na\n{uid}".encode()).hexdigest()[:5]
    )
    assert wls["a"]["metadata"]["ownerReferences"][0] | {"uid": ""} == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "a",
        "uid": "",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert wls["a"]["spec"]["queueName"] == "gpu-queue"
    for name in ("a", "b"):
        assert (
            condition(wls[name], "QuotaReserved")["message"]
            == "Quota reserved in ClusterQueue gpu-cluster-queue"
        )
        assert condition(wls[name], "Admitted")["reason"] == "Admitted"
        assert wls[name]["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU] == "gpu-t4"
        pod = pods[name]
        assert not pod.spec.scheduling_gates
        assert pod.spec.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    pending = condition(wls["c"], "QuotaReserved")
    assert (pending["status"], pending["reason"], pending["message"]) == (
        "False",
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor gpu-t4, 1 more needed",
    )
    assert [g.name for g in pods["c"].spec.scheduling_gates] == [GATE]
    assert scheduled_condition(core, "c").reason == "SchedulingGated"

    kueue_sim.advance(600)  # the admitted two get GPU nodes from the autoscaler; the gated one does not
    assert {core.read_namespaced_pod(n, NS).spec.node_name for n in ("a", "b")} <= set(gpu_nodes(kueue_sim))
    assert len(gpu_nodes(kueue_sim)) == 2
    assert core.read_namespaced_pod("c", NS).spec.node_name is None

    core.delete_namespaced_pod("a", NS, grace_period_seconds=0)
    kueue_sim.advance(5)
    wls = workloads(kapi)
    assert "a" not in wls
    assert condition(wls["c"], "Admitted")["status"] == "True"
    assert not core.read_namespaced_pod("c", NS).spec.scheduling_gates


def test_a_finished_pod_finishes_its_workload_and_frees_its_quota(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    core = client.CoreV1Api(kapi)
    core.create_namespaced_pod(NS, gpu_pod("short", command=["sh", "-c", "sleep 60"]))
    core.create_namespaced_pod(NS, gpu_pod("long"))
    kueue_sim.advance(1)
    core.create_namespaced_pod(NS, gpu_pod("next"))
    kueue_sim.advance(2)
    assert condition(workloads(kapi)["next"], "QuotaReserved")["status"] == "False"
    kueue_sim.advance(900)
    assert core.read_namespaced_pod("short", NS).status.phase == "Succeeded"
    wls = workloads(kapi)
    finished = condition(wls["short"], "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    assert condition(wls["next"], "Admitted")["status"] == "True"
    cq = client.CustomObjectsApi(kapi).get_cluster_custom_object(
        GROUP, V2, "clusterqueues", "gpu-cluster-queue"
    )
    assert (cq["status"]["pendingWorkloads"], cq["status"]["admittedWorkloads"]) == (0, 2)


def test_visibility_numbers_pending_workloads_with_limit_and_offset(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    core = client.CoreV1Api(kapi)
    for name in ("a", "b", "c", "d", "e"):
        core.create_namespaced_pod(NS, gpu_pod(name))
        kueue_sim.advance(1)
    url = kueue_sim.url
    for version in ("v1beta2", "v1beta1"):
        status, body = get_raw(
            kapi,
            url,
            f"/apis/visibility.kueue.x-k8s.io/{version}/namespaces/{NS}/localqueues/gpu-queue/pendingworkloads",
        )
        assert status == 200 and body["kind"] == "PendingWorkloadsSummary"
        assert body["apiVersion"] == f"visibility.kueue.x-k8s.io/{version}"
        shown = [
            (
                i["metadata"]["ownerReferences"][0]["name"],
                i["positionInLocalQueue"],
                i["positionInClusterQueue"],
                i["localQueueName"],
            )
            for i in body["items"]
        ]
        assert shown == [("c", 0, 0, "gpu-queue"), ("d", 1, 1, "gpu-queue"), ("e", 2, 2, "gpu-queue")]
    _, page = get_raw(
        kapi,
        url,
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/gpu-cluster-queue/pendingworkloads?limit=1&offset=1",
    )
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in page["items"]] == [(1, 1)]
    status, missing = get_raw(
        kapi,
        url,
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/nope/pendingworkloads",
    )
    assert (status, missing["message"]) == (404, 'localqueue.visibility.kueue.x-k8s.io "nope" not found')


def test_a_pod_naming_a_missing_queue_is_inadmissible(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    client.CoreV1Api(kapi).create_namespaced_pod(NS, gpu_pod("lost", queue="nope"))
    kueue_sim.advance(2)
    reserved = condition(workloads(kapi)["lost"], "QuotaReserved")
    assert (reserved["reason"], reserved["message"]) == ("Inadmissible", "LocalQueue nope doesn't exist")


def test_v1beta1_is_served_converted_and_deprecated(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(kapi)
    cq, _, headers = custom.get_cluster_custom_object_with_http_info(
        GROUP, V1, "clusterqueues", "gpu-cluster-queue"
    )
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert "This version is deprecated. Use v1beta2 instead." in headers["Warning"]
    body = {
        "apiVersion": f"{GROUP}/{V1}",
        "kind": "ClusterQueue",
        "metadata": {"name": "old"},
        "spec": {"cohort": "team", "resourceGroups": []},
    }
    custom.create_cluster_custom_object(GROUP, V1, "clusterqueues", body)
    assert custom.get_cluster_custom_object(GROUP, V2, "clusterqueues", "old")["spec"]["cohortName"] == "team"
    assert custom.get_cluster_custom_object(GROUP, V1, "clusterqueues", "old")["spec"] == {
        "cohort": "team",
        "resourceGroups": [],
    }


def test_kubectl_reads_workloads_and_queues(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient, tmp_path: Path
) -> None:
    client.CoreV1Api(kapi).create_namespaced_pod(NS, gpu_pod("a"))
    kueue_sim.advance(2)
    config_path = tmp_path / "kubeconfig"
    world.write_kubeconfig(config_path, kueue_sim.url)
    kubectl = Kubectl(config_path, tmp_path / "cache", tmp_path)
    lines = kubectl.ok("get", "workloads", "-n", NS).splitlines()
    assert lines[0].split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
    assert lines[1].split()[:4] == [
        workloads(kapi)["a"]["metadata"]["name"],
        "gpu-queue",
        "gpu-cluster-queue",
        "True",
    ]
    assert "gpu-queue" in kubectl.ok("get", "lq", "-n", NS)
    assert "gpu-cluster-queue" in kubectl.ok("get", "clusterqueues")


def test_without_kueue_its_apis_are_absent_and_the_queue_label_does_nothing(
    sim: world.BackgroundWorld, core: client.CoreV1Api, api_client: client.ApiClient
) -> None:
    _, listed = get_raw(api_client, sim.url, "/apis")
    assert not {g["name"] for g in listed["groups"]} & {GROUP, "visibility.kueue.x-k8s.io"}
    with pytest.raises(client.ApiException) as absent:
        client.CustomObjectsApi(api_client).list_namespaced_custom_object(GROUP, V2, NS, "workloads")
    assert absent.value.status == 404
    core.create_namespaced_pod(NS, gpu_pod("plain"))
    assert not core.read_namespaced_pod("plain", NS).spec.scheduling_gates


def test_discovery_prefers_v1beta2(kueue_sim: world.BackgroundWorld, kapi: client.ApiClient) -> None:
    _, listed = get_raw(kapi, kueue_sim.url, "/apis")
    groups = {g["name"]: g for g in listed["groups"]}
    assert groups[GROUP]["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in groups[GROUP]["versions"]] == ["v1beta2", "v1beta1"]
    assert groups["visibility.kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    _, visibility = get_raw(kapi, kueue_sim.url, "/apis/visibility.kueue.x-k8s.io/v1beta2")
    assert {r["name"]: r["verbs"] for r in visibility["resources"]} == {
        "clusterqueues": [],
        "clusterqueues/pendingworkloads": ["get"],
        "localqueues": [],
        "localqueues/pendingworkloads": ["get"],
    }


def test_a_higher_priority_workload_goes_ahead_in_the_queue(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    """A Workload created directly (as a Job integration would) with priority 10 passes the waiting pods."""
    core, custom = client.CoreV1Api(kapi), client.CustomObjectsApi(kapi)
    for name in ("a", "b", "c"):
        core.create_namespaced_pod(NS, gpu_pod(name))
        kueue_sim.advance(1)
    template = {
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"requests": {GPU: "1"}}}]}
    }
    urgent = {
        "apiVersion": f"{GROUP}/{V2}",
        "kind": "Workload",
        "metadata": {"name": "urgent"},
        "spec": {
            "queueName": "gpu-queue",
            "priority": 10,
            "podSets": [{"name": "main", "count": 1, "template": template}],
        },
    }
    custom.create_namespaced_custom_object(GROUP, V2, NS, "workloads", urgent)
    kueue_sim.advance(1)
    _, body = get_raw(
        kapi,
        kueue_sim.url,
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/gpu-queue/pendingworkloads",
    )
    assert [(i["metadata"]["name"], i["priority"], i["positionInClusterQueue"]) for i in body["items"]] == [
        ("urgent", 10, 0),
        (workloads(kapi)["c"]["metadata"]["name"], 0, 1),
    ]
    # Its status is the controller's: a write to the main resource keeps it, as the status subresource does.
    patched = custom.patch_namespaced_custom_object(
        GROUP,
        V2,
        NS,
        "workloads",
        "urgent",
        {"status": {"admission": None}, "metadata": {"labels": {"x": "y"}}},
    )
    assert condition(patched, "QuotaReserved")["reason"] == "Pending"
    assert patched["metadata"]["labels"] == {"x": "y"}


def test_workloads_can_be_watched_from_a_version(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(kapi)
    mark = custom.list_namespaced_custom_object(GROUP, V2, NS, "workloads")["metadata"]["resourceVersion"]
    client.CoreV1Api(kapi).create_namespaced_pod(NS, gpu_pod("a"))
    kueue_sim.advance(1)
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object, GROUP, V1, NS, "workloads", resource_version=mark
    )
    seen = [
        (e["type"], e["object"]["apiVersion"], condition_status(e["object"]))
        for e in itertools.islice(stream, 2)
    ]
    assert seen == [("ADDED", f"{GROUP}/{V1}", None), ("MODIFIED", f"{GROUP}/{V1}", "True")]


def condition_status(wl: dict[str, Any]) -> str | None:
    found = [c["status"] for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == "Admitted"]
    return found[0] if found else None


def test_a_workload_larger_than_the_quota_says_it_never_fits(
    kueue_sim: world.BackgroundWorld, kapi: client.ApiClient
) -> None:
    big = gpu_pod("big")
    big["spec"]["containers"][0]["resources"] = {"limits": {GPU: "3"}}
    client.CoreV1Api(kapi).create_namespaced_pod(NS, big)
    kueue_sim.advance(1)
    assert condition(workloads(kapi)["big"], "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor gpu-t4, "
        "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)"
    )
