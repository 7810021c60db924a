"""The Kubernetes adapter against a faulty API server: informers resume once, calls retry, writes land once.

Faults are switched on the sim's own API; the adapter is the real client over loopback.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from bot.adapters import kube, kube_retry
from bot.core import errors, labels
from sim.cluster import faults, world
from tests.faults.rig import QUICK_INFORMERS, QUICK_REQUESTS
from tests.integration.test_kube_adapter import NAMESPACE, manifest

WAIT = 10.0


def connect(sim: world.BackgroundWorld, tmp_path: Path, **requests: Any) -> kube.KubeCluster:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    settings = kube_retry.RequestSettings(**{**vars(QUICK_REQUESTS), **requests})
    return kube.KubeCluster.from_kubeconfig(
        str(path), namespace=NAMESPACE, informer_settings=QUICK_INFORMERS, request_settings=settings
    )


@pytest.fixture
def cluster(sim: world.BackgroundWorld, tmp_path: Path) -> Iterator[kube.KubeCluster]:
    adapter = connect(sim, tmp_path)
    yield adapter
    adapter.stop()


def set_faults(sim: world.BackgroundWorld, **fields: Any) -> None:
    sim.run(lambda: sim.world.api.faults.set(faults.ApiFaultConfig(**fields)))


def fault_counts(sim: world.BackgroundWorld) -> dict[str, int]:
    return sim.run(lambda: dict(sim.world.api.faults.counts))


def gpubot_pod_names(sim: world.BackgroundWorld) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in sim.pods()
        if p["metadata"]["labels"].get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
    ]


class PodDeliveries:
    """Every pod change the informer delivers, keyed by (name, resourceVersion), waited on, never slept."""

    def __init__(self) -> None:
        self.seen: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._changed = threading.Condition()

    def record(self, change: str, obj: Mapping[str, Any]) -> None:
        metadata = obj["metadata"]
        with self._changed:
            self.seen[(change, metadata["name"], metadata["resourceVersion"])] += 1
            self._changed.notify_all()

    def wait_for_version(self, name: str, version: str) -> None:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(n == name and rv == version for _, n, rv in self.seen), timeout=WAIT
            )
        assert found, f"{name}@{version} never delivered; saw {sorted(self.seen)}"


def start_pod_informer(cluster: kube.KubeCluster) -> PodDeliveries:
    deliveries = PodDeliveries()
    cluster.start_informers(on_pod=deliveries.record, on_event=ignore, on_node=ignore)
    assert cluster.wait_synced(WAIT)
    return deliveries


def ignore(change: str, obj: Mapping[str, Any]) -> None:
    """Events and nodes are not what these tests count."""


def touch(sim: world.BackgroundWorld, name: str, value: str) -> str:
    """Change the pod in the store (as a controller would) and return its new resourceVersion."""
    return sim.run(lambda: touch_on_loop(sim, name, value))


def touch_on_loop(sim: world.BackgroundWorld, name: str, value: str) -> str:
    def annotate(pod: dict[str, Any]) -> None:
        pod["metadata"].setdefault("annotations", {})["test/touch"] = value

    changed = sim.world.store.mutate("pods", NAMESPACE, name, annotate)
    assert changed is not None
    return str(changed["metadata"]["resourceVersion"])


def wait_for_watches(sim: world.BackgroundWorld, count: int) -> None:
    done = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        if sim.run(sim.world.api.faults.open_watches) >= count:
            done.set()
            break
        done.wait(0.01)
    assert done.is_set(), "the informers did not reopen their watches"


# -- informers ------------------------------------------------------------------------------------------


def test_a_watch_cut_mid_stream_resumes_where_it_was_cut(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    name = cluster.create_pod(manifest()).name
    deliveries = start_pod_informer(cluster)
    for cut in range(3):
        wait_for_watches(sim, 3)
        for i in range(4):
            version = touch(sim, name, f"{cut}.{i}")
        deliveries.wait_for_version(name, version)
        assert sim.run(lambda: sim.world.api.faults.end_watches("drop")) == 3
    wait_for_watches(sim, 3)
    deliveries.wait_for_version(name, touch(sim, name, "after"))

    twice = {key: n for key, n in deliveries.seen.items() if n > 1}
    assert not twice, f"delivered more than once: {twice}"
    assert len(deliveries.seen) == 1 + 3 * 4 + 1  # the list's ADDED, every change, the last one
    assert sum(i.relists for i in cluster.informers) == 0 and fault_counts(sim)["drops"] == 9


def test_a_410_mid_stream_relists_and_delivers_only_what_changed(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    name = cluster.create_pod(manifest()).name
    deliveries = start_pod_informer(cluster)
    wait_for_watches(sim, 3)
    assert sim.run(lambda: sim.world.api.faults.end_watches("gone")) == 3
    wait_for_watches(sim, 3)  # each informer relisted (the history is compacted) and watches again
    deliveries.wait_for_version(name, touch(sim, name, "after"))

    assert [informer.relists for informer in cluster.informers] == [1, 1, 1]
    assert max(deliveries.seen.values()) == 1 and len(deliveries.seen) == 2  # nothing replayed twice


def test_resuming_from_before_a_compaction_gets_410_and_relists(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    """A watch cut, then the history compacted before it resumes: the resume is refused, so it relists."""
    name = cluster.create_pod(manifest()).name
    deliveries = start_pod_informer(cluster)
    wait_for_watches(sim, 3)

    def cut_change_and_compact() -> str:
        sim.world.api.faults.end_watches("drop")
        version = touch_on_loop(sim, name, "while cut")
        sim.world.store.compact()
        return version

    version = sim.run(cut_change_and_compact)
    deliveries.wait_for_version(name, version)
    assert cluster.informers[0].relists == 1 and max(deliveries.seen.values()) == 1


def test_stopping_a_stream_the_server_already_ended_is_quiet(sim: world.BackgroundWorld) -> None:
    """`stop()` races the end of a watch: the response may already be released, or closed (its socket then
    gone: CI once saw EBADF). urllib3 raises on shutting either; `shut_stream` must not, or stopping would
    skip the remaining informers and leave them retrying forever."""
    pool = urllib3.PoolManager()
    released = pool.request("GET", f"{sim.url}/version", preload_content=False)
    released.read()
    released.release_conn()
    closed = pool.request("GET", f"{sim.url}/version", preload_content=False)
    closed.close()
    for response in (released, closed):
        with pytest.raises((OSError, RuntimeError, ValueError)):
            response.shutdown()
        kube.shut_stream(response)


# -- calls ------------------------------------------------------------------------------------------------


def test_reads_retry_through_5xx(sim: world.BackgroundWorld, cluster: kube.KubeCluster) -> None:
    name = cluster.create_pod(manifest()).name
    set_faults(sim, error_rate=0.5, seed=3)
    for _ in range(10):
        assert [w.name for w in cluster.list_workloads()] == [name]
        assert cluster.get_workload(NAMESPACE, name) is not None
    assert fault_counts(sim)["errors"] >= 5


def test_a_create_whose_answer_is_lost_makes_one_pod_and_reports_it(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    set_faults(sim, timeout_rate=1.0, committed_timeouts=1.0, hold_seconds=1.0, verbs=frozenset({"create"}))
    created = cluster.create_pod(manifest())
    assert gpubot_pod_names(sim) == [created.name]
    assert fault_counts(sim)["committed"] >= 1


def test_a_create_refused_every_time_fails_and_leaves_no_pod(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    set_faults(sim, error_rate=1.0, verbs=frozenset({"create"}))
    with pytest.raises(errors.Unavailable):
        cluster.create_pod(manifest())
    assert gpubot_pod_names(sim) == []
    assert fault_counts(sim)["errors"] == QUICK_REQUESTS.attempts


def test_a_name_taken_by_another_pod_is_still_a_conflict(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    """A retry recognises only its own pod: another thread's pod under the name stays a Conflict."""
    cluster.create_pod(manifest(name="shared"))
    # Seed 1 holds the first create (not carried out) and lets the retry through to AlreadyExists.
    set_faults(
        sim, timeout_rate=0.5, committed_timeouts=0.0, hold_seconds=1.0, seed=1, verbs=frozenset({"create"})
    )
    with pytest.raises(errors.Conflict):
        cluster.create_pod(manifest(name="shared", thread_ts="1700.2"))
    assert fault_counts(sim)["timeouts"] == 1
    assert gpubot_pod_names(sim) == ["shared"]


def test_a_guarded_patch_whose_answer_is_lost_is_not_reported_as_a_conflict(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    workload = cluster.get_workload(NAMESPACE, cluster.create_pod(manifest()).name)
    assert workload is not None  # as last read: the scheduler has marked it unschedulable since
    set_faults(sim, timeout_rate=1.0, committed_timeouts=1.0, hold_seconds=1.0, verbs=frozenset({"patch"}))
    cluster.annotate_pod(
        NAMESPACE, workload.name, {"test/mark": "once"}, resource_version=workload.resource_version
    )
    pod = sim.run(lambda: sim.world.store.get("pods", NAMESPACE, workload.name))
    assert pod is not None and pod["metadata"]["annotations"]["test/mark"] == "once"


def test_a_held_request_times_out_on_the_client_and_is_retried(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    """The sim holds every get far past the client's read timeout: the client gives up by itself."""
    name = cluster.create_pod(manifest()).name
    set_faults(sim, timeout_rate=1.0, hold_seconds=30.0, verbs=frozenset({"get"}))
    with pytest.raises(errors.Unavailable) as raised:
        cluster.get_workload(NAMESPACE, name)
    assert str(raised.value) == "the Kubernetes API did not answer in time"  # no internal host or port
    assert fault_counts(sim)["timeouts"] == QUICK_REQUESTS.attempts


def test_a_hung_api_server_fails_a_call_within_its_deadline_not_after_every_try(
    sim: world.BackgroundWorld, tmp_path: Path
) -> None:
    """Each try waits out the read timeout; no new try starts that could end past the deadline, so a
    person waits about one deadline, not attempts times the read timeout."""
    hurried = connect(sim, tmp_path, deadline_seconds=2.5)  # a try may take 2 s connect + 0.3 s read
    try:
        name = hurried.create_pod(manifest()).name
        set_faults(sim, timeout_rate=1.0, hold_seconds=30.0, verbs=frozenset({"get"}))
        with pytest.raises(errors.Unavailable):
            hurried.get_workload(NAMESPACE, name)
    finally:
        hurried.stop()
    assert fault_counts(sim)["timeouts"] == 1 < QUICK_REQUESTS.attempts
