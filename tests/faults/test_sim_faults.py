"""The sim's API faults themselves: what a client meets is what a real apiserver sends on a bad day."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.clock import Clock
from sim.cluster import faults, world
from sim.cluster.store import Store

Json = dict[str, Any]


def control(sim: world.BackgroundWorld, body: Json) -> urllib3.BaseHTTPResponse:
    return urllib3.request("POST", sim.url + "/simctl/v1/faults/api", json=body, retries=False)


def switch(sim: world.BackgroundWorld, **fields: Any) -> Json:
    answer = control(sim, fields)
    assert answer.status == 200, answer.data
    found: Json = answer.json()
    return found


def pod(name: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def status_of(err: ApiException) -> Json:
    body: Json = json.loads(err.body)
    return body


@pytest.fixture
def core(sim: world.BackgroundWorld) -> Iterator[client.CoreV1Api]:
    """The official client without urllib3's own retries (it retries a 503 with Retry-After three
    times by default), so each test sees exactly what the server answered."""
    configuration = client.Configuration(host=sim.url)
    configuration.retries = False
    with client.ApiClient(configuration) as api:
        yield client.CoreV1Api(api)


@pytest.fixture
def raw() -> Iterator[urllib3.PoolManager]:
    with urllib3.PoolManager(retries=False) as pool:
        yield pool


def watch(pool: urllib3.PoolManager, sim: world.BackgroundWorld, since: str = "") -> urllib3.BaseHTTPResponse:
    query = "watch=1" + (f"&resourceVersion={since}" if since else "")
    return pool.request(
        "GET", f"{sim.url}/api/v1/namespaces/default/pods?{query}", preload_content=False, timeout=10
    )


def next_event(stream: urllib3.BaseHTTPResponse) -> Json:
    line = stream.readline()
    assert line, "the watch ended without an event"
    event: Json = json.loads(line)
    return event


def wait_open(sim: world.BackgroundWorld, count: int) -> None:
    """The stream's headers can reach us a loop turn before the sim registers it; each check is a turn."""
    for _ in range(1000):
        if sim.run(sim.world.api.faults.open_watches) >= count:
            return
    raise AssertionError("the watch never opened")


# -- answers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        (500, "InternalError", "Internal error occurred: etcdserver: request timed out"),
        (503, "ServiceUnavailable", "the server is currently unable to handle the request"),
    ],
)
def test_an_error_is_a_kubernetes_status_for_the_chosen_resources_only(
    sim: world.BackgroundWorld, core: client.CoreV1Api, status: int, reason: str, message: str
) -> None:
    switch(sim, error_rate=1.0, statuses=[status], resources=["pods"])
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_pod("default")
    assert raised.value.status == status
    assert status_of(raised.value) == {
        **status_of(raised.value),
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": status,
        "message": message,
    }
    assert core.list_node().items  # other resources are untouched
    assert switch(sim)["counts"]["errors"] == 1  # an empty body keeps the faults as they are


def test_a_verb_filter_fails_only_that_verb(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    switch(sim, error_rate=1.0, statuses=[503], verbs=["create"])
    assert core.list_namespaced_pod("default").items == []
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod("default", pod("refused"))
    assert raised.value.status == 503 and raised.value.headers["Retry-After"] == "1"
    assert sim.pods() == []


@pytest.mark.parametrize(("carried_out", "pods"), [(1.0, ["held"]), (0.0, [])])
def test_a_held_request_answers_504_and_may_have_been_carried_out(
    sim: world.BackgroundWorld, core: client.CoreV1Api, carried_out: float, pods: list[str]
) -> None:
    switch(sim, timeout_rate=1.0, hold_seconds=0.2, committed_timeouts=carried_out, verbs=["create"])
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod("default", pod("held"))
    assert raised.value.status == 504 and status_of(raised.value)["reason"] == "Timeout"
    assert [p["metadata"]["name"] for p in sim.pods()] == pods


def test_faults_are_seeded() -> None:
    def draws(seed: int) -> list[faults.Fault | None]:
        injected = faults.ApiFaults(Store(Clock()))
        injected.set(faults.ApiFaultConfig(error_rate=0.2, timeout_rate=0.2, seed=seed))
        return [injected.pick("create", "pods") for _ in range(200)]

    assert draws(7) == draws(7) and draws(7) != draws(8)
    kinds = [d for d in draws(7) if d is not None]
    assert 20 < sum(d.status > 0 for d in kinds) < 60 and 20 < sum(d.status == 0 for d in kinds) < 60


def test_a_watch_is_never_held(sim: world.BackgroundWorld, raw: urllib3.PoolManager) -> None:
    """Long-running requests are exempt from the apiserver's request timeout."""
    switch(sim, timeout_rate=1.0, hold_seconds=30.0)
    stream = watch(raw, sim)
    sim.run(lambda: sim.world.store.create("pods", pod("seen")))
    assert next_event(stream)["type"] == "ADDED"


# -- watches ----------------------------------------------------------------------------------------------


def test_a_dropped_watch_ends_without_its_final_chunk(
    sim: world.BackgroundWorld, raw: urllib3.PoolManager
) -> None:
    stream = watch(raw, sim)
    wait_open(sim, 1)
    assert switch(sim, watches="drop")["ended"] == 1
    with pytest.raises(urllib3.exceptions.ProtocolError):
        stream.read()


def test_a_forced_410_is_an_error_event_and_the_old_version_is_gone(
    sim: world.BackgroundWorld, raw: urllib3.PoolManager
) -> None:
    sim.run(lambda: sim.world.store.create("pods", pod("before")))
    since = str(sim.run(lambda: sim.world.store.resource_version))
    stream = watch(raw, sim, since)
    wait_open(sim, 1)
    assert switch(sim, watches="gone")["ended"] == 1
    event = next_event(stream)
    assert event["type"] == "ERROR"
    assert {k: event["object"][k] for k in ("kind", "status", "reason", "code")} == {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
    }
    assert event["object"]["message"].startswith(f"too old resource version: {since} (")
    assert stream.read() == b""  # then the stream ends cleanly

    resumed = next_event(watch(raw, sim, str(int(since) - 1)))  # the history is compacted: relist
    assert resumed["type"] == "ERROR" and resumed["object"]["code"] == 410
    sim.run(lambda: sim.world.store.create("pods", pod("after")))
    assert next_event(watch(raw, sim, since))["object"]["metadata"]["name"] == "after"


@pytest.mark.parametrize(("field", "count"), [("gone_every", "gones"), ("drop_watches_every", "drops")])
def test_periodic_watch_faults_follow_simulated_time(
    sim: world.BackgroundWorld, raw: urllib3.PoolManager, field: str, count: str
) -> None:
    switch(sim, **{field: 30})
    stream = watch(raw, sim)
    wait_open(sim, 1)
    sim.advance(29)
    assert sim.run(lambda: sim.world.api.faults.counts[count]) == 0
    sim.advance(1)
    assert sim.run(lambda: sim.world.api.faults.counts[count]) == 1
    stream.release_conn()
    watch(raw, sim)
    wait_open(sim, 1)
    sim.advance(30)
    assert sim.run(lambda: sim.world.api.faults.counts[count]) == 2


def test_faults_can_be_set_from_the_world_config() -> None:
    broken_nodes = faults.ApiFaultConfig(error_rate=1.0, resources=frozenset({"nodes"}))
    config = world.WorldConfig(api_faults=broken_nodes)
    with world.BackgroundWorld(config) as sim:
        configuration = client.Configuration(host=sim.url)
        configuration.retries = False
        with client.ApiClient(configuration) as api, pytest.raises(ApiException) as raised:
            client.CoreV1Api(api).list_node()
        assert raised.value.status in (500, 503)


# -- the control endpoint ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"error_rate": 0.1, "typo": 1}, "unknown fault fields: typo"),
        ({"error_rate": 1.5}, "error_rate must be between 0 and 1"),
        ({"error_rate": 0.6, "timeout_rate": 0.6}, "must not exceed 1"),
        ({"statuses": [404]}, "statuses must be 5xx codes"),
        ({"watches": "explode"}, '"watches" must be "drop" or "gone"'),
    ],
)
def test_the_control_endpoint_refuses_what_it_cannot_do(
    sim: world.BackgroundWorld, body: Json, says: str
) -> None:
    answer = control(sim, body)
    assert answer.status == 400 and says in answer.json()["error"]
    shown = urllib3.request("GET", sim.url + "/simctl/v1/faults/api").json()
    assert shown["config"] == faults.ApiFaultConfig().to_json()  # nothing changed
