"""The API server's answers at the edges, through the official Python client and raw HTTP: eviction
against a budget, metadata-only lists, the initial-events-end bookmark, DeleteOptions checks, bodies
the server cannot read, and the catch-all that keeps Python's own errors out of every answer."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from sim.cluster import world

NS = "default"
REQUEST_TIMEOUT = 30
"""Real seconds any one request may take before the test gives up on it."""


def running_pod(core: client.CoreV1Api, sim: world.BackgroundWorld, name: str, app: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
    }
    core.create_namespaced_pod(NS, pod)
    sim.advance(5)
    assert core.read_namespaced_pod(name, NS).status.phase == "Running"


def guard(api_client: client.ApiClient, sim: world.BackgroundWorld, app: str) -> None:
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }
    client.PolicyV1Api(api_client).create_namespaced_pod_disruption_budget(NS, budget)
    sim.settle()


def eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}


def raw(
    sim: world.BackgroundWorld,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    request = urllib.request.Request(sim.url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


# -- eviction --------------------------------------------------------------------------------------


def test_a_budget_with_no_disruption_left_refuses_eviction_with_its_cause(
    sim: world.BackgroundWorld, api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    running_pod(core, sim, "solo", "guarded")
    guard(api_client, sim, "guarded")

    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction("solo", NS, eviction("solo"))

    assert refused.value.status == 429
    assert json.loads(refused.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "code": 429,
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget guard needs 1 healthy pods and has 1 currently",
                }
            ]
        },
    }
    assert core.read_namespaced_pod("solo", NS).metadata.deletion_timestamp is None


def test_a_budget_with_room_is_spent_by_an_eviction(
    sim: world.BackgroundWorld, api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    running_pod(core, sim, "one", "pair")
    running_pod(core, sim, "two", "pair")
    guard(api_client, sim, "pair")
    policy = client.PolicyV1Api(api_client)
    assert policy.read_namespaced_pod_disruption_budget("guard", NS).status.disruptions_allowed == 1

    core.create_namespaced_pod_eviction("one", NS, eviction("one"))
    sim.settle()

    assert core.read_namespaced_pod("one", NS).metadata.deletion_timestamp is not None
    status = policy.read_namespaced_pod_disruption_budget("guard", NS).status
    assert (status.disruptions_allowed, status.current_healthy, status.desired_healthy) == (0, 1, 1)
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction("two", NS, eviction("two"))
    assert refused.value.status == 429


def test_an_eviction_naming_another_pod_is_a_bad_request(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    running_pod(core, sim, "solo", "plain")
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction("solo", NS, eviction("other"))
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"] == "name in URL does not match name in Eviction object"


# -- reads -----------------------------------------------------------------------------------------


def test_a_metadata_only_list_holds_partial_object_metadata(sim: world.BackgroundWorld) -> None:
    accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    accept += "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    status, body = raw(sim, "GET", "/api/v1/nodes", headers={"Accept": accept})
    listed = json.loads(body)

    assert status == 200
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert len(listed["items"]) == 2
    for item in listed["items"]:
        assert set(item) == {"kind", "apiVersion", "metadata"}
        assert item["kind"] == "PartialObjectMetadata" and item["metadata"]["name"].startswith("gke-demo-")


def test_a_streaming_list_ends_its_initial_events_with_the_annotated_bookmark(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    running_pod(core, sim, "seen", "plain")
    stream = core.list_namespaced_pod(
        NS,
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        _preload_content=False,
        _request_timeout=REQUEST_TIMEOUT,
    )
    events = []
    try:
        for line in stream:
            events.append(json.loads(line))
            if events[-1]["type"] == "BOOKMARK":
                break
    finally:
        stream.close()

    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "seen"),
        ("BOOKMARK", None),
    ]
    bookmark = events[-1]["object"]["metadata"]
    assert bookmark["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["resourceVersion"]) >= int(events[0]["object"]["metadata"]["resourceVersion"])


def test_send_initial_events_without_not_older_than_is_invalid(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as refused:
        core.list_namespaced_pod(NS, watch=True, send_initial_events=True, allow_watch_bookmarks=True)
    assert refused.value.status == 422
    assert json.loads(refused.value.body)["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    )


# -- writes ----------------------------------------------------------------------------------------


def test_an_unknown_propagation_policy_is_refused_before_anything_is_deleted(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    running_pod(core, sim, "kept", "plain")
    with pytest.raises(client.ApiException) as refused:
        core.delete_namespaced_pod("kept", NS, propagation_policy="Sideways")

    assert refused.value.status == 422
    body = json.loads(refused.value.body)
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": '
        'supported values: "Foreground", "Background", "Orphan", "nil"'
    )
    assert core.read_namespaced_pod("kept", NS).metadata.deletion_timestamp is None
    core.delete_namespaced_pod("kept", NS, propagation_policy="Background")


def test_server_side_apply_needs_a_field_manager(sim: world.BackgroundWorld) -> None:
    applied = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}'
    headers = {"Content-Type": "application/apply-patch+yaml"}
    status, body = raw(sim, "PATCH", f"/api/v1/namespaces/{NS}/configmaps/c", applied, headers)
    assert status == 422
    assert json.loads(body)["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    status, body = raw(
        sim, "PATCH", f"/api/v1/namespaces/{NS}/configmaps/c?fieldManager=me", applied, headers
    )
    assert status == 201
    assert json.loads(body)["metadata"]["managedFields"][0]["manager"] == "me"


def test_a_protobuf_delete_body_is_read(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    running_pod(core, sim, "gone", "plain")
    # runtime.Unknown{typeMeta{apiVersion v1, kind DeleteOptions}, raw DeleteOptions{gracePeriodSeconds 0}}
    options = b"\x08\x00"
    type_meta = b"\x0a\x02v1\x12\x0dDeleteOptions"
    envelope = (
        b"k8s\x00" + b"\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12" + bytes([len(options)]) + options
    )
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    status, _ = raw(sim, "DELETE", f"/api/v1/namespaces/{NS}/pods/gone", envelope, headers)
    assert status == 200
    assert sim.pods() == []


def test_other_protobuf_bodies_get_the_apiservers_415(sim: world.BackgroundWorld) -> None:
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    status, body = raw(sim, "POST", f"/api/v1/namespaces/{NS}/events", b"k8s\x00\x0a\x00", headers)
    assert status == 415
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml",
        "reason": "UnsupportedMediaType",
        "code": 415,
    }


def test_an_unknown_patch_type_lists_only_the_accepted_ones(sim: world.BackgroundWorld) -> None:
    status, body = raw(sim, "PATCH", "/api/v1/nodes/any", b"{}", {"Content-Type": "text/plain"})
    assert status == 415
    assert json.loads(body)["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
        "application/strategic-merge-patch+json"
    )


# -- no Python in any answer -----------------------------------------------------------------------

MALFORMED: list[tuple[str, str, bytes | None, dict[str, str]]] = [
    ("POST", f"/api/v1/namespaces/{NS}/pods", b"{bad", {"Content-Type": "application/json"}),
    ("POST", f"/api/v1/namespaces/{NS}/pods", b"", {"Content-Type": "application/json"}),
    ("POST", f"/api/v1/namespaces/{NS}/pods", b"\xff\xfe", {"Content-Type": "application/json"}),
    ("POST", f"/api/v1/namespaces/{NS}/pods", b"a: [", {"Content-Type": "application/yaml"}),
    ("POST", f"/api/v1/namespaces/{NS}/pods", b"[1, 2]", {"Content-Type": "application/json"}),
    ("POST", f"/api/v1/namespaces/{NS}/configmaps", b'{"data": 5}', {"Content-Type": "application/json"}),
    ("PUT", "/api/v1/nodes/x", b"{}}", {"Content-Type": "application/json"}),
    ("PATCH", "/api/v1/nodes/x", b"{", {"Content-Type": "application/merge-patch+json"}),
    (
        "DELETE",
        f"/api/v1/namespaces/{NS}/pods/x",
        b"k8s\x00\x0a\xff",
        {"Content-Type": "application/vnd.kubernetes.protobuf"},
    ),
    ("DELETE", f"/api/v1/namespaces/{NS}/pods/x", b"{]", {"Content-Type": "application/json"}),
    ("DELETE", f"/api/v1/namespaces/{NS}/pods/x?gracePeriodSeconds=soon", None, {}),
    ("POST", f"/api/v1/namespaces/{NS}/pods/x/eviction", b"{", {"Content-Type": "application/json"}),
    ("GET", f"/api/v1/namespaces/{NS}/pods?limit=lots", None, {}),
    ("GET", f"/api/v1/namespaces/{NS}/pods?continue=%%%", None, {}),
    ("GET", f"/api/v1/namespaces/{NS}/pods?watch=true&timeoutSeconds=never", None, {}),
    ("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=a%20in%20(", None, {}),
]

PYTHON_WORDS = (
    "Traceback",
    "Expecting value",
    "line 1 column",
    "Error(",
    "object has no attribute",
    "invalid literal",
)


@pytest.mark.parametrize(("method", "path", "body", "headers"), MALFORMED)
def test_a_malformed_request_gets_a_status_never_python_text(
    sim: world.BackgroundWorld, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> None:
    status, text = raw(sim, method, path, body, headers)
    answer = json.loads(text)
    assert answer["kind"] == "Status" and answer["code"] == status >= 400
    assert not any(word in text for word in PYTHON_WORDS), text
    if status == 500:
        assert answer["reason"] == "InternalError"
        assert answer["message"].startswith("Internal error occurred: ")


def test_a_server_fault_answers_internal_error_and_logs_the_traceback(
    sim: world.BackgroundWorld, caplog: pytest.LogCaptureFixture
) -> None:
    # A controller bug, stood in for by an object no printer can read: the Table printer fails on it.
    broken = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "broken", "namespace": NS},
        "data": 7,
    }
    sim.run(lambda: sim.world.store.create("configmaps", broken))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

    with caplog.at_level("ERROR", logger="sim.cluster.apiserver"):
        status, text = raw(sim, "GET", f"/api/v1/namespaces/{NS}/configmaps", headers={"Accept": accept})

    assert status == 500
    assert json.loads(text) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Internal error occurred: the simulated API server failed on this request; "
        "its log has the details",
        "reason": "InternalError",
        "code": 500,
        "details": {
            "causes": [
                {"message": "the simulated API server failed on this request; its log has the details"}
            ]
        },
    }
    (record,) = [r for r in caplog.records if r.name == "sim.cluster.apiserver"]
    assert record.exc_info is not None
    assert f"GET /api/v1/namespaces/{NS}/configmaps" in record.getMessage()


def test_a_pod_in_protobuf_with_fields_the_sim_does_not_read_is_refused_whole(
    sim: world.BackgroundWorld,
) -> None:
    """podproto reads what `kubectl debug node` sends; a pod with more (here spec.schedulerName, field 19)
    is refused rather than stored without it."""
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    spec = b"\x9a\x01\x02my"  # field 19 (schedulerName), length 2
    pod = b"\x0a\x03\x0a\x01p" + b"\x12" + bytes([len(spec)]) + spec  # metadata {name: "p"}, spec
    envelope = b"k8s\x00\x0a\x09\x0a\x02v1\x12\x03Pod\x12" + bytes([len(pod)]) + pod
    status, body = raw(sim, "POST", f"/api/v1/namespaces/{NS}/pods", envelope, headers)
    assert (status, json.loads(body)["reason"]) == (400, "BadRequest")
    assert sim.pods() == []
