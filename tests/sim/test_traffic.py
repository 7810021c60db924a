"""The sim's request and watch counts by client (User-Agent), verb and resource, as a bench reads them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client, watch

from sim.cluster import world


def api(sim: world.BackgroundWorld, agent: str) -> client.CoreV1Api:
    found = client.ApiClient(client.Configuration(host=sim.url))
    found.user_agent = agent
    return client.CoreV1Api(found)


def counts(sim: world.BackgroundWorld) -> dict[tuple[str, str, str], int]:
    shown = sim.run(sim.world.api.traffic.snapshot)
    return {(r["userAgent"], r["verb"], r["resource"]): r["count"] for r in shown["requests"]}


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}


@pytest.fixture
def fresh(sim: world.BackgroundWorld) -> Iterator[world.BackgroundWorld]:
    sim.run(sim.world.api.traffic.reset)
    yield sim


def test_requests_are_counted_by_client_verb_and_resource(fresh: world.BackgroundWorld) -> None:
    reader, writer = api(fresh, "reader/1"), api(fresh, "writer/1")
    reader.list_namespaced_pod("default")
    reader.list_namespaced_pod("default")
    writer.create_namespaced_pod("default", POD)
    writer.read_namespaced_pod("p", "default")
    writer.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(client.ApiException):
        writer.read_namespaced_pod("missing", "default")
    assert counts(fresh) == {
        ("reader/1", "list", "pods"): 2,
        ("writer/1", "create", "pods"): 1,
        ("writer/1", "get", "pods"): 2,
        ("writer/1", "patch", "pods"): 1,
    }
    fresh.run(fresh.world.api.traffic.reset)
    assert counts(fresh) == {}


def test_a_watch_counts_as_open_until_its_stream_ends(fresh: world.BackgroundWorld) -> None:
    watcher = api(fresh, "watcher/1")
    started = threading.Event()

    def follow() -> None:
        for _ in watch.Watch().stream(watcher.list_namespaced_pod, "default", timeout_seconds=30):
            started.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    api(fresh, "writer/1").create_namespaced_pod("default", POD)
    assert started.wait(10), "the watch saw the new pod"
    shown = fresh.run(fresh.world.api.traffic.snapshot)
    assert shown["watches"] == [{"userAgent": "watcher/1", "resource": "pods", "open": 1}]
    assert shown["peakWatches"] == {"watcher/1": 1}
    assert counts(fresh)[("watcher/1", "watch", "pods")] == 1
    fresh.advance(31)  # the server ends the watch at its timeout, on the sim's clock
    thread.join(10)
    assert not thread.is_alive()
    assert fresh.run(fresh.world.api.traffic.snapshot)["watches"] == []
