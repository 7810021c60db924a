"""The official kubernetes client (sync and asyncio) against the embedded API server, over real HTTP."""

from __future__ import annotations

import asyncio
import datetime
import json
import queue
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from sim.cluster import world

NS = "default"
OTHER_SCHEDULER = "manual-scheduler"
"""The sim's scheduler ignores pods naming another scheduler, so they stay unbound until we bind them."""


def pod(
    name: str, labels: dict[str, str] | None = None, *, bound: bool = False, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }
    if not bound:
        body["spec"].setdefault("schedulerName", OTHER_SCHEDULER)
    return body


def error_body(err: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err.body)
    return body


def store_rv(sim: world.BackgroundWorld) -> int:
    return sim.run(lambda: sim.world.store.resource_version)


def raw(sim: world.BackgroundWorld, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
    """A request the client's local validation would refuse to send: (status, JSON body, headers)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(sim.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers


def events_of(stream: Iterator[dict[str, Any]], count: int) -> list[tuple[str, str]]:
    out = []
    for event in stream:
        out.append((event["type"], event["object"].metadata.name))
        if len(out) == count:
            break
    return out


class Background:
    """A watch consumed on a thread, so the test can write while it streams; ends when the server ends it."""

    def __init__(self, func: Any, *args: Any, **kwargs: Any) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(func, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, func: Any, args: Any, kwargs: Any) -> None:
        try:
            for event in watch.Watch().stream(func, *args, **kwargs):
                self.events.put((event["type"], event["object"]))
        except BaseException as err:
            self.error = err

    def next(self) -> tuple[str, Any]:
        return self.events.get(timeout=10)

    def join(self) -> None:
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the server did not end the watch"


# -- list, get, create -------------------------------------------------------------------------


def test_list_has_kind_and_current_resource_version(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    listed = core.list_namespaced_pod(NS)
    assert listed.kind == "PodList" and listed.api_version == "v1"
    assert listed.metadata.resource_version == str(store_rv(sim))
    assert [p.metadata.name for p in listed.items] == ["a"]
    got = core.read_namespaced_pod("a", NS)
    assert (got.metadata.namespace, got.metadata.uid) == (NS, listed.items[0].metadata.uid)
    assert got.spec.restart_policy == "Always" and got.status.phase == "Pending"


def test_generate_name(core: client.CoreV1Api) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "job-"}
    made = [core.create_namespaced_pod(NS, body).metadata.name for _ in range(3)]
    assert all(n.startswith("job-") and len(n) == len("job-") + 5 for n in made)
    assert len(set(made)) == 3
    assert core.read_namespaced_pod(made[0], NS).metadata.generate_name == "job-"


@pytest.mark.parametrize(
    ("namespace", "body_namespace", "status", "reason", "message"),
    [
        (
            NS,
            "kube-system",
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        ("nope", None, 404, "NotFound", 'namespaces "nope" not found'),
    ],
)
def test_create_namespace_errors(
    core: client.CoreV1Api, namespace: str, body_namespace: str | None, status: int, reason: str, message: str
) -> None:
    body = pod("x")
    if body_namespace:
        body["metadata"]["namespace"] = body_namespace
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, body)
    got = error_body(caught.value)
    assert (caught.value.status, got["reason"], got["message"], got["code"]) == (
        status,
        reason,
        message,
        status,
    )


def test_not_found_and_already_exists_bodies(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("ghost", NS)
    assert error_body(missing.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "kind": "pods"},
        "code": 404,
    }
    core.create_namespaced_pod(NS, pod("twice"))
    with pytest.raises(ApiException) as dup:
        core.create_namespaced_pod(NS, pod("twice"))
    body = error_body(dup.value)
    assert (dup.value.status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'pods "twice" already exists',
    )
    assert body["details"] == {"name": "twice", "kind": "pods"}
    with pytest.raises(ApiException) as lease_missing:
        client.CoordinationV1Api(core.api_client).read_namespaced_lease("none", NS)
    assert error_body(lease_missing.value)["details"] == {
        "name": "none",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }
    assert error_body(lease_missing.value)["message"] == 'leases.coordination.k8s.io "none" not found'


# -- watch ---------------------------------------------------------------------------------------


def test_watch_streams_added_modified_deleted_live(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    live = Background(core.list_namespaced_pod, NS, resource_version=start, timeout_seconds=60)
    core.create_namespaced_pod(NS, pod("w"))
    assert live.next()[0] == "ADDED"
    core.patch_namespaced_pod("w", NS, {"metadata": {"labels": {"seen": "yes"}}})
    kind, obj = live.next()
    assert (kind, obj.metadata.labels) == ("MODIFIED", {"seen": "yes"})
    core.delete_namespaced_pod("w", NS)
    assert live.next()[0] == "DELETED"


def test_watch_resumes_after_resource_version(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("before"))
    mark = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("after"))
    core.delete_namespaced_pod("before", NS)
    stream = watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=mark)
    assert events_of(stream, 2) == [("ADDED", "after"), ("DELETED", "before")]


def test_watch_without_version_lists_first(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("b"))
    core.create_namespaced_pod(NS, pod("a"))
    stream = watch.Watch().stream(core.list_namespaced_pod, NS)
    assert events_of(stream, 2) == [("ADDED", "a"), ("ADDED", "b")]


def test_expired_resource_version_raises_410(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    sim.run(lambda: sim.world.store.limit_history(3))
    first = core.create_namespaced_pod(NS, pod("p0")).metadata.resource_version
    for i in range(1, 6):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    with pytest.raises(ApiException) as caught:
        next(
            iter(
                watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=first, timeout_seconds=5)
            )
        )
    assert caught.value.status == 410
    assert "Expired: too old resource version" in str(caught.value.reason)


def test_timeout_seconds_ends_the_watch_on_the_simulated_clock(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    live = Background(core.list_namespaced_pod, NS, resource_version=start, timeout_seconds=30)
    core.create_namespaced_pod(NS, pod("tick"))
    assert live.next()[0] == "ADDED"  # the watch is subscribed, so its timer runs
    sim.advance(29)
    assert live.thread.is_alive()
    sim.advance(2)
    live.join()
    assert live.error is None


SELECTED = {
    "web-1": {"app": "web", "tier": "front"},
    "web-2": {"app": "web"},
    "db": {"app": "db", "tier": "back"},
    "bare": {},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app==db", ["db"]),
        ("app!=web", ["bare", "db"]),
        ("tier in (front,back)", ["db", "web-1"]),
        ("tier notin (front)", ["bare", "db", "web-2"]),
        ("tier", ["db", "web-1"]),
        ("!tier", ["bare", "web-2"]),
        ("app=web,tier", ["web-1"]),
    ],
)
def test_label_selectors_on_list_and_watch(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    mark = core.list_namespaced_pod(NS).metadata.resource_version
    for name, labels in SELECTED.items():
        core.create_namespaced_pod(NS, pod(name, labels))
    listed = [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector=selector).items]
    assert listed == expected
    stream = watch.Watch().stream(
        core.list_namespaced_pod, NS, label_selector=selector, resource_version=mark
    )
    assert sorted(name for _, name in events_of(stream, len(expected))) == expected
    initial = watch.Watch().stream(core.list_namespaced_pod, NS, label_selector=selector)
    assert [name for _, name in events_of(initial, len(expected))] == expected


def test_field_selectors_on_list(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("runs", bound=True))
    core.create_namespaced_pod(NS, pod("waits"))
    sim.advance(20)
    node = core.read_namespaced_pod("runs", NS).spec.node_name
    assert node
    cases = {
        "metadata.name=waits": ["waits"],
        f"spec.nodeName={node}": ["runs"],
        "spec.nodeName=": ["waits"],
        "status.phase=Running": ["runs"],
        "status.phase!=Running": ["waits"],
        "metadata.name!=runs,status.phase=Pending": ["waits"],
    }
    for selector, expected in cases.items():
        assert [
            p.metadata.name for p in core.list_namespaced_pod(NS, field_selector=selector).items
        ] == expected, selector
    reasons = {
        e.reason for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=runs").items
    }
    assert {"Scheduled", "Started"} <= reasons
    assert core.list_namespaced_event(NS, field_selector="involvedObject.name=waits").items == []


def test_field_selector_on_watch(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    mark = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("runs", bound=True))
    core.create_namespaced_pod(NS, pod("waits"))
    sim.advance(20)
    stream = watch.Watch().stream(
        core.list_namespaced_pod, NS, field_selector="status.phase=Running", resource_version=mark
    )
    event = next(iter(stream))
    assert (event["type"], event["object"].metadata.name, event["object"].status.phase) == (
        "ADDED",
        "runs",
        "Running",
    )


def test_leaving_the_selector_is_deleted_in_a_filtered_watch(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("mover", {"app": "web"}))
    mark = core.list_namespaced_pod(NS).metadata.resource_version
    core.patch_namespaced_pod("mover", NS, {"metadata": {"labels": {"app": "db"}}})
    core.patch_namespaced_pod("mover", NS, {"metadata": {"labels": {"app": "web"}}})
    stream = watch.Watch().stream(
        core.list_namespaced_pod, NS, label_selector="app=web", resource_version=mark
    )
    assert events_of(stream, 2) == [("DELETED", "mover"), ("ADDED", "mover")]


# -- patch, update, status subresource -----------------------------------------------------------


def test_strategic_merge_patch_merges_containers_by_name(core: client.CoreV1Api) -> None:
    body = pod("two")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    core.create_namespaced_pod(NS, body)
    patched = core.patch_namespaced_pod(
        "two", NS, {"spec": {"containers": [{"name": "side", "image": "nginx:1.27"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "busybox:1.36"),
        ("side", "nginx:1.27"),
    ]


def test_merge_patch_null_deletes_a_label(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("m", {"keep": "1", "drop": "1"}))
    patched = core.patch_namespaced_pod(
        "m", NS, {"metadata": {"labels": {"drop": None}}}, _content_type="application/merge-patch+json"
    )
    assert patched.metadata.labels == {"keep": "1"}


def test_json_patch(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("j", {"a": "1"}))
    ops = [
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"},
    ]
    patched = core.patch_namespaced_pod("j", NS, ops)
    assert patched.metadata.labels == {"b": "2"} and patched.spec.containers[0].image == "nginx:1.27"
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("j", NS, [{"op": "test", "path": "/metadata/labels/b", "value": "3"}])
    body = error_body(caught.value)
    assert (caught.value.status, body["reason"]) == (422, "Invalid")
    assert body["message"] == "the server rejected our request due to an error in our request"
    assert body["details"]["causes"][0]["message"] == "testing value /metadata/labels/b failed: test failed"
    assert core.read_namespaced_pod("j", NS).metadata.labels == {"b": "2"}


def test_put_with_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    stale = core.create_namespaced_pod(NS, pod("c"))
    core.patch_namespaced_pod("c", NS, {"metadata": {"labels": {"moved": "on"}}})
    stale.metadata.labels = {"mine": "1"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_pod("c", NS, stale)
    body = error_body(caught.value)
    assert (caught.value.status, body["reason"], body["details"]) == (
        409,
        "Conflict",
        {"name": "c", "kind": "pods"},
    )
    fresh = core.read_namespaced_pod("c", NS)
    fresh.metadata.labels = {"mine": "1"}
    assert core.replace_namespaced_pod("c", NS, fresh).metadata.labels == {"mine": "1"}


def test_status_subresource_is_kept_apart_from_spec(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("s"))
    after_status = core.patch_namespaced_pod_status(
        "s", NS, {"spec": {"activeDeadlineSeconds": 5}, "status": {"message": "from status"}}
    )
    assert after_status.status.message == "from status" and after_status.spec.active_deadline_seconds is None
    current = core.read_namespaced_pod("s", NS)
    current.status.message = "from main"
    current.metadata.labels = {"main": "write"}
    replaced = core.replace_namespaced_pod("s", NS, current)
    assert replaced.status.message == "from status" and replaced.metadata.labels == {"main": "write"}
    current = core.read_namespaced_pod("s", NS)
    current.status.message = "by put"
    assert core.replace_namespaced_pod_status("s", NS, current).status.message == "by put"


# -- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "reason", "field", "message"),
    [
        (
            lambda b: b["spec"].update(containers=[]),
            "FieldValueRequired",
            "spec.containers",
            "Required value",
        ),
        (
            lambda b: b["metadata"].update(labels={"app": "not ok!"}),
            "FieldValueInvalid",
            "metadata.labels",
            'Invalid value: "not ok!"',
        ),
    ],
)
def test_invalid_pod_is_422_with_causes(
    core: client.CoreV1Api, mutate: Any, reason: str, field: str, message: str
) -> None:
    body = pod("bad")
    mutate(body)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(NS, body)
    status = error_body(caught.value)
    assert (caught.value.status, status["reason"], status["details"]["kind"]) == (422, "Invalid", "Pod")
    assert status["message"].startswith('Pod "bad" is invalid: ')
    cause = status["details"]["causes"][0]
    assert (cause["reason"], cause["field"]) == (reason, field) and cause["message"].startswith(message)
    with pytest.raises(ApiException):
        core.read_namespaced_pod("bad", NS)


def test_unknown_field_strict_is_400_and_warn_is_a_header(sim: world.BackgroundWorld) -> None:
    body = pod("u")
    body["spec"]["bogus"] = True
    status, got, _ = raw(sim, "POST", f"/api/v1/namespaces/{NS}/pods?fieldValidation=Strict", body)
    assert (status, got["reason"]) == (400, "BadRequest")
    assert (
        got["message"]
        == 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.bogus"'
    )
    status, got, headers = raw(sim, "POST", f"/api/v1/namespaces/{NS}/pods", body)
    assert status == 201 and "bogus" not in got["spec"]
    assert headers["Warning"] == '299 - "unknown field \\"spec.bogus\\""'


def test_dry_run_admits_and_validates_but_stores_nothing(core: client.CoreV1Api) -> None:
    made = core.create_namespaced_pod(NS, pod("dry"), dry_run="All")
    assert (
        made.metadata.uid
        and made.spec.dns_policy == "ClusterFirst"
        and made.metadata.resource_version is None
    )
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod(NS, {**pod("dry"), "spec": {"containers": []}}, dry_run="All")
    assert invalid.value.status == 422
    core.create_namespaced_pod(NS, pod("wet"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    assert core.patch_namespaced_pod(
        "wet", NS, {"metadata": {"labels": {"a": "b"}}}, dry_run="All"
    ).metadata.labels
    core.delete_namespaced_pod("wet", NS, dry_run="All")
    listed = core.list_namespaced_pod(NS)
    assert [p.metadata.name for p in listed.items] == ["wet"] and listed.items[0].metadata.labels is None
    assert listed.metadata.resource_version == rv
    with pytest.raises(ApiException) as bad:
        core.delete_namespaced_pod("wet", NS, dry_run="Maybe")
    assert error_body(bad.value)["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: '
        'dryRun: Unsupported value: []string{"Maybe"}: supported values: "All"'
    )


# -- deletion --------------------------------------------------------------------------------------


def test_deleting_a_bound_pod_is_graceful(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("g", bound=True))
    sim.advance(20)
    assert core.read_namespaced_pod("g", NS).status.phase == "Running"
    mark = core.list_namespaced_pod(NS).metadata.resource_version
    answer = core.delete_namespaced_pod("g", NS)
    assert (
        answer.metadata.deletion_timestamp is not None and answer.metadata.deletion_grace_period_seconds == 30
    )
    assert core.read_namespaced_pod("g", NS).metadata.deletion_timestamp is not None
    sim.advance(40)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("g", NS)
    assert caught.value.status == 404
    replay = watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=mark, timeout_seconds=1)
    kinds = [kind for kind, _ in events_of(replay, 2)]
    assert kinds == ["MODIFIED", "DELETED"]


@pytest.mark.parametrize("bound", [False, True])
def test_unbound_or_forced_deletion_is_immediate(
    sim: world.BackgroundWorld, core: client.CoreV1Api, bound: bool
) -> None:
    core.create_namespaced_pod(NS, pod("u", bound=bound))
    sim.advance(20)
    assert bool(core.read_namespaced_pod("u", NS).spec.node_name) == bound
    core.delete_namespaced_pod("u", NS, grace_period_seconds=0 if bound else None)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("u", NS)
    assert caught.value.status == 404


@pytest.mark.parametrize(
    ("precondition", "wording"),
    [
        (
            {"uid": "not-it"},
            "the UID in the precondition (not-it) does not match the UID in record ({uid}). "
            "The object might have been deleted and then recreated",
        ),
        (
            {"resource_version": "1"},
            "the ResourceVersion in the precondition (1) does not match the ResourceVersion in record "
            "({version}). The object might have been modified",
        ),
    ],
)
def test_delete_preconditions(core: client.CoreV1Api, precondition: dict[str, str], wording: str) -> None:
    """Worded as rest.BeforeDelete words them (the kind, not the resource, in `on Pod`)."""
    made = core.create_namespaced_pod(NS, pod("pre"))
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(**precondition))
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod("pre", NS, body=options)
    assert caught.value.status == 409
    body = error_body(caught.value)
    said = wording.format(uid=made.metadata.uid, version=made.metadata.resource_version)
    assert body["message"] == f'Operation cannot be fulfilled on Pod "pre": {said}'
    assert (body["reason"], body["details"]) == ("Conflict", {"name": "pre", "kind": "Pod"})
    current = core.read_namespaced_pod("pre", NS)
    exact = client.V1Preconditions(
        uid=current.metadata.uid, resource_version=current.metadata.resource_version
    )
    core.delete_namespaced_pod("pre", NS, body=client.V1DeleteOptions(preconditions=exact))
    assert core.list_namespaced_pod(NS).items == []


def test_delete_collection_with_label_selector(core: client.CoreV1Api) -> None:
    for name, tier in (("x1", "x"), ("x2", "x"), ("y1", "y")):
        core.create_namespaced_pod(NS, pod(name, {"tier": tier}))
    core.delete_collection_namespaced_pod(NS, label_selector="tier=x")
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["y1"]


# -- events ----------------------------------------------------------------------------------------


def test_events_v1_is_a_view_of_core_events(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("ev", bound=True))
    sim.advance(20)
    events_v1 = client.EventsV1Api(core.api_client)
    legacy = {e.metadata.name: e for e in core.list_namespaced_event(NS).items}
    modern = {e.metadata.name: e for e in events_v1.list_namespaced_event(NS).items}
    assert legacy and legacy.keys() == modern.keys()
    for name, old in legacy.items():
        new = modern[name]
        assert (new.regarding.name, new.note, new.reason) == (
            old.involved_object.name,
            old.message,
            old.reason,
        )
    regarding = events_v1.list_namespaced_event(NS, field_selector="regarding.name=ev").items
    assert regarding and {e.regarding.name for e in regarding} == {"ev"}


def test_create_core_event(core: client.CoreV1Api) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "bot.1"},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": NS},
        "reason": "Nudged",
        "message": "the bot nudged it",
        "type": "Normal",
        "source": {"component": "gpubot"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    }
    made = core.create_namespaced_event(NS, body)
    assert made.metadata.uid and made.reason == "Nudged"
    seen = client.EventsV1Api(core.api_client).read_namespaced_event("bot.1", NS)
    assert (seen.note, seen.regarding.name, seen.deprecated_source.component) == (
        "the bot nudged it",
        "x",
        "gpubot",
    )


def test_events_v1_create_patch_and_strict_validation(core: client.CoreV1Api) -> None:
    events_v1 = client.EventsV1Api(core.api_client)
    body = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="bot.2"),
        event_time=datetime.datetime.now(datetime.UTC),
        reason="Nudged",
        note="first",
        action="Nudge",
        type="Normal",
        reporting_controller="gpubot.io/bot",
        reporting_instance="bot-1",
        regarding=client.V1ObjectReference(kind="Pod", name="p", namespace=NS),
    )
    made = events_v1.create_namespaced_event(NS, body)
    assert core.read_namespaced_event("bot.2", NS).reporting_component == "gpubot.io/bot"
    assert made.event_time.microsecond == body.event_time.microsecond
    patched = events_v1.patch_namespaced_event("bot.2", NS, {"note": "second"})
    assert (patched.note, core.read_namespaced_event("bot.2", NS).message) == ("second", "second")
    body.metadata.name, body.reporting_controller = "bot.3", None
    with pytest.raises(ApiException) as caught:
        events_v1.create_namespaced_event(NS, body)
    causes = error_body(caught.value)["details"]["causes"]
    assert {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "reportingController",
    } in causes


# -- leases and leader election --------------------------------------------------------------------


def lease(name: str, holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def test_lease_optimistic_concurrency(core: client.CoreV1Api) -> None:
    leases = client.CoordinationV1Api(core.api_client)
    leases.create_namespaced_lease(NS, lease("gpubot", "a"))
    first, second = leases.read_namespaced_lease("gpubot", NS), leases.read_namespaced_lease("gpubot", NS)
    first.spec.holder_identity = "a"
    first.spec.lease_transitions = 1
    assert leases.replace_namespaced_lease("gpubot", NS, first).spec.lease_transitions == 1
    second.spec.holder_identity = "b"
    with pytest.raises(ApiException) as caught:
        leases.replace_namespaced_lease("gpubot", NS, second)
    assert caught.value.status == 409 and error_body(caught.value)["reason"] == "Conflict"
    assert leases.read_namespaced_lease("gpubot", NS).spec.holder_identity == "a"


def test_client_leader_election_one_leader(sim: world.BackgroundWorld, api_client: client.ApiClient) -> None:
    """`LeaderElection.run` sleeps on wall time, so drive its one step, `try_acquire_or_renew`, directly."""
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    def candidate(identity: str) -> leaderelection.LeaderElection:
        lock = LeaseLock("gpubot-leader", NS, identity)
        lock.api_instance = client.CoordinationV1Api(api_client)
        return leaderelection.LeaderElection(electionconfig.Config(lock, 15, 10, 2, lambda: None, None))

    a, b = candidate("a"), candidate("b")
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert a.try_acquire_or_renew() is True  # renew
    held = client.CoordinationV1Api(api_client).read_namespaced_lease("gpubot-leader", NS)
    assert held.spec.holder_identity == "a" and held.spec.lease_duration_seconds == 15
    assert held.spec.renew_time >= held.spec.acquire_time
    # The client sends isoformat() (`+00:00`); the server stores a MicroTime as Go writes one.
    _, stored, _ = raw(sim, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/gpubot-leader")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stored["spec"]["renewTime"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stored["metadata"]["creationTimestamp"])


# -- namespaces, configmaps, binding ---------------------------------------------------------------


def test_namespace_and_configmap_crud(core: client.CoreV1Api) -> None:
    ns = core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert ns.status.phase == "Active" and ns.metadata.labels == {"kubernetes.io/metadata.name": "team"}
    assert "team" in [n.metadata.name for n in core.list_namespace().items]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}}
    core.create_namespaced_config_map("team", cm)
    core.patch_namespaced_config_map("cfg", "team", {"data": {"k2": "v2"}})
    got = core.read_namespaced_config_map("cfg", "team")
    assert got.data == {"k": "v", "k2": "v2"}
    got.data = {"only": "this"}
    assert core.replace_namespaced_config_map("cfg", "team", got).data == {"only": "this"}
    core.delete_namespaced_config_map("cfg", "team")
    assert core.list_namespaced_config_map("team").items == []
    core.delete_namespace("team")
    assert "team" not in [n.metadata.name for n in core.list_namespace().items]


def test_autoscaler_status_configmap(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    sim.advance(15)
    status = yaml.safe_load(
        core.read_namespaced_config_map("cluster-autoscaler-status", "kube-system").data["status"]
    )
    assert status["clusterWide"]["health"]["status"] == "Healthy"
    assert any("gpu-pool" in group["name"] for group in status["nodeGroups"])


@pytest.mark.parametrize("form", ["pods/NAME/binding", "bindings"])
def test_binding_binds_a_pod_the_scheduler_ignores(
    sim: world.BackgroundWorld, core: client.CoreV1Api, form: str
) -> None:
    core.create_namespaced_pod(NS, pod("hand"))
    sim.advance(5)
    assert core.read_namespaced_pod("hand", NS).spec.node_name is None
    node = core.list_node().items[0].metadata.name
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "hand"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }

    def bind() -> Any:
        # The server answers a Status, as the real one does, which the client's V1Binding model
        # cannot hold (it requires `target`), so the answer is read raw.
        if form == "bindings":
            return core.create_namespaced_binding(NS, binding, _preload_content=False)
        return core.create_namespaced_pod_binding("hand", NS, binding, _preload_content=False)

    answer = json.loads(bind().data)
    assert (answer["kind"], answer["status"], answer["code"]) == ("Status", "Success", 201)
    bound = core.read_namespaced_pod("hand", NS)
    assert bound.spec.node_name == node
    assert [c.status for c in bound.status.conditions if c.type == "PodScheduled"] == ["True"]
    with pytest.raises(ApiException) as caught:
        bind()
    assert caught.value.status == 409
    assert error_body(caught.value)["message"] == (
        f'Operation cannot be fulfilled on pods/binding "hand": pod hand is already assigned to node "{node}"'
    )


# -- asyncio client --------------------------------------------------------------------------------


def test_asyncio_client_lists_and_watches(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    from kubernetes.aio import client as aio_client
    from kubernetes.aio import watch as aio_watch

    core.create_namespaced_pod(NS, pod("async"))

    async def scenario() -> tuple[list[str], list[tuple[str, str]]]:
        async with aio_client.ApiClient(aio_client.Configuration(host=sim.url)) as api:
            pods = aio_client.CoreV1Api(api)
            listed = await pods.list_namespaced_pod(NS)
            seen = []
            stream = aio_watch.Watch().stream(
                pods.list_namespaced_pod, NS, resource_version="0", timeout_seconds=10
            )
            async for event in stream:
                seen.append((event["type"], event["object"].metadata.name))
                await asyncio.to_thread(sim.advance, 11)
            return [p.metadata.name for p in listed.items], seen

    names, seen = asyncio.run(scenario())
    assert names == ["async"] and seen == [("ADDED", "async")]


def test_a_closing_bookmark_never_skips_a_change_queued_after_the_timeout(sim: world.BackgroundWorld) -> None:
    """A change committed in the instant the watch times out must still reach a client resuming from it."""
    path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=5&allowWatchBookmarks=true"
    url = f"{sim.url}{path}&resourceVersion={store_rv(sim)}"
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        with urllib.request.urlopen(url, timeout=30) as stream:
            for line in stream:
                lines.put(json.loads(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for _ in range(500):  # bounded: until the server has registered the watch
        if sim.run(lambda: sim.world.store.watcher_count) == 1:
            break
        reader.join(timeout=0.01)

    def time_out_then_write() -> int:
        sim.world.clock.advance(5)  # the watch's end marker is queued first...
        late = sim.world.store.create(  # ...then a change lands behind it
            "configmaps",
            {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "late", "namespace": "default"}},
        )
        return int(late["metadata"]["resourceVersion"])

    late_rv = sim.run(time_out_then_write)
    reader.join(timeout=10)
    events = [lines.get() for _ in range(lines.qsize())]
    assert events[-1]["type"] == "BOOKMARK"
    resumed_from = int(events[-1]["object"]["metadata"]["resourceVersion"])
    assert resumed_from < late_rv
    replay = sim.run(lambda: sim.world.store.changes_after(resumed_from))
    assert [c.obj["metadata"]["name"] for c in replay] == ["late"]
