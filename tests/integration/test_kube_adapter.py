"""The Kubernetes adapter against the embedded cluster: the real sync client over loopback, manual clock."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bot.adapters import kube
from bot.core import cluster_nodes, errors, labels, lifecycle, models, podspec, ports, workloads
from sim.cluster import world
from tests.sim import test_scenarios as scenarios

NAMESPACE = "default"
GPU_PROFILE = models.GpuProfile(
    name="t4",
    tolerations=(models.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
    node_selector=(("app-type", "gpu-workloads"),),
)
ALICE = models.Owner(user_id="U01ALICE", user_name="Alice")
BOB = models.Owner(user_id="U02BOB", user_name="Bob")
CUDA = "nvidia/cuda:12.2.0-base-ubuntu22.04"
WAIT = 10.0
"""Real seconds a test waits for informer threads; only reached when something is broken."""


def manifest(
    owner: models.Owner = ALICE, *, name: str | None = None, thread_ts: str = "1700.1"
) -> dict[str, Any]:
    request = models.RunRequest(image=CUDA, name=name, command=("sleep", "3600"), text=f"run {CUDA}")
    return podspec.build_pod(
        request,
        GPU_PROFILE,
        owner,
        now=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
        lease=timedelta(hours=2),
        channel="C0GPU",
        thread_ts=thread_ts,
        namespace=NAMESPACE,
    )


def connect(sim: world.BackgroundWorld, tmp_path: Path, **settings: Any) -> kube.KubeCluster:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    informer_settings = kube.InformerSettings(**settings)
    return kube.KubeCluster.from_kubeconfig(
        str(path), namespace=NAMESPACE, informer_settings=informer_settings
    )


@pytest.fixture
def cluster(sim: world.BackgroundWorld, tmp_path: Path) -> Iterator[kube.KubeCluster]:
    adapter = connect(sim, tmp_path)
    yield adapter
    adapter.stop()


@dataclass(frozen=True)
class Seen:
    kind: str
    change: str
    obj: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


class Recorder:
    """Collects informer callbacks from their threads; tests wait on a condition, never sleep."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._changed = threading.Condition()

    def callback(self, kind: str) -> ports.WatchCallback:
        def record(change: str, obj: Mapping[str, Any]) -> None:
            with self._changed:
                self.seen.append(Seen(kind, change, obj))
                self._changed.notify_all()

        return record

    def start(self, cluster: kube.KubeCluster) -> None:
        cluster.start_informers(
            on_pod=self.callback("pod"), on_event=self.callback("event"), on_node=self.callback("node")
        )
        assert cluster.wait_synced(WAIT)

    def wait_for(self, what: str, found: Callable[[list[Seen]], bool]) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: found(self.seen), timeout=WAIT):
                raise AssertionError(
                    f"never saw {what}; saw {[(s.kind, s.change, s.name) for s in self.seen]}"
                )

    def of(self, kind: str) -> list[Seen]:
        with self._changed:
            return [s for s in self.seen if s.kind == kind]


def advance_until(
    sim: world.BackgroundWorld, done: Callable[[], bool], *, limit: float, step: float = 10
) -> None:
    """Move the simulated clock until the cluster itself reaches a state (read from the store)."""
    moved = 0.0
    while not done():
        assert moved < limit, f"not reached within {limit}s of simulated time"
        sim.advance(step)
        moved += step


def pod_phase(sim: world.BackgroundWorld, name: str) -> str | None:
    found = [p for p in sim.pods(NAMESPACE) if p["metadata"]["name"] == name]
    return str(found[0].get("status", {}).get("phase")) if found else None


# -- requests and the error taxonomy ---------------------------------------------------------------


def test_created_pod_is_seen_through_list_and_get(cluster: kube.KubeCluster) -> None:
    created = cluster.create_pod(manifest())
    assert (created.owner_id, created.requester_name, created.profile, created.gpus) == (
        "U01ALICE",
        "Alice",
        "t4",
        1,
    )
    assert (created.channel, created.thread_ts, created.phase, created.uid != "") == (
        "C0GPU",
        "1700.1",
        "Pending",
        True,
    )
    fetched = cluster.get_workload(NAMESPACE, created.name)
    assert fetched is not None and fetched.uid == created.uid
    assert cluster.list_workloads() == [fetched]


def test_list_workloads_filters_by_owner_and_skips_other_pods(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    alice = cluster.create_pod(manifest(ALICE))
    bob = cluster.create_pod(manifest(BOB))
    unmanaged = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    sim.run(
        lambda: sim.world.store.create(
            "pods", {**unmanaged, "metadata": {"name": "web", "namespace": NAMESPACE}}
        )
    )
    assert [w.name for w in cluster.list_workloads()] == sorted([alice.name, bob.name])
    assert [w.name for w in cluster.list_workloads("U02BOB")] == [bob.name]
    assert cluster.list_workloads("U03NOBODY") == []
    assert cluster.get_workload(NAMESPACE, "web") is None
    assert cluster.get_workload(NAMESPACE, "missing") is None


def test_errors_map_to_the_taxonomy(sim: world.BackgroundWorld, cluster: kube.KubeCluster) -> None:
    cluster.create_pod(manifest())
    with pytest.raises(errors.Conflict, match="already exists"):
        cluster.create_pod(manifest())
    with pytest.raises(errors.NotFound, match='pods "missing" not found'):
        cluster.delete_pod(NAMESPACE, "missing")
    with pytest.raises(errors.Invalid, match="Invalid value"):
        cluster.create_pod(manifest(name="Not_A_DNS_Name"))


def test_fields_the_client_would_drop_are_refused_before_sending(cluster: kube.KubeCluster) -> None:
    body = manifest()
    body["spec"]["tolerations"][0]["important"] = "yes"
    with pytest.raises(errors.Invalid, match=r"spec\.tolerations\[0\]\.important"):
        cluster.create_pod(body)
    body = manifest()
    body["spec"]["containers"] = "not a list"
    with pytest.raises(errors.Invalid, match="rejected by the client"):
        cluster.create_pod(body)
    body = manifest()
    del body["metadata"]["labels"][labels.MANAGED_BY_LABEL]
    with pytest.raises(errors.Invalid, match="managed-by"):
        cluster.create_pod(body)
    assert cluster.list_workloads() == []


def test_unreachable_api_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(world.kubeconfig(f"http://127.0.0.1:{port}")))
    dead = kube.KubeCluster.from_kubeconfig(str(path), namespace=NAMESPACE)
    with pytest.raises(errors.Unavailable):
        dead.list_workloads()


def test_nodes_and_autoscaler_status(cluster: kube.KubeCluster) -> None:
    nodes = cluster.list_nodes()
    assert [(n.pool, n.ready, n.gpus) for n in nodes] == [("default-pool", True, 0)] * 2
    status = cluster.read_autoscaler_status()
    assert status is not None and "autoscalerStatus: Running" in status


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (404, {}, errors.NotFound),
        (409, {}, errors.Conflict),
        (410, {}, errors.Gone),
        (422, {}, errors.Invalid),
        (403, {}, errors.Forbidden),
        (429, {"Retry-After": "7"}, errors.RateLimited),
        (500, {}, errors.Unavailable),
        (503, {}, errors.Unavailable),
    ],
)
def test_convert_by_status(status: int, headers: dict[str, str], expected: type[errors.GpubotError]) -> None:
    err = ApiException(status=status, reason="Reason")
    err.headers = headers
    err.body = json.dumps({"kind": "Status", "message": f"the server says {status}"})
    converted = kube.convert(err)
    assert type(converted) is expected and str(converted) == f"the server says {status}"
    if isinstance(converted, errors.RateLimited):
        assert converted.retry_after == 7.0


def obj(name: str, version: str, uid: str = "u") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": version, "uid": uid}}


def test_replay_turns_the_cache_into_the_listed_state() -> None:
    cache = {"ns/kept": obj("kept", "5"), "ns/changed": obj("changed", "6"), "ns/gone": obj("gone", "7")}
    cache["ns/reborn"] = obj("reborn", "8", uid="old")
    listed = [obj("new", "20"), obj("changed", "12"), obj("kept", "5"), obj("reborn", "15", uid="fresh")]
    changes = [
        (change, o["metadata"]["name"], o["metadata"]["uid"]) for change, o in kube.replay(cache, listed)
    ]
    assert changes == [
        (ports.DELETED, "gone", "u"),
        (ports.MODIFIED, "changed", "u"),
        (ports.DELETED, "reborn", "old"),
        (ports.ADDED, "reborn", "fresh"),
        (ports.ADDED, "new", "u"),
    ]


# -- informers ------------------------------------------------------------------------------------


def reasons_about(seen: list[Seen], name: str) -> list[str]:
    return [s.obj["reason"] for s in seen if s.kind == "event" and s.obj["involvedObject"]["name"] == name]


def has_event(name: str, reason: str) -> Callable[[list[Seen]], bool]:
    return lambda seen: reason in reasons_about(seen, name)


def gpu_nodes(seen: list[Seen]) -> list[Seen]:
    return [
        s
        for s in seen
        if s.kind == "node" and s.obj["metadata"]["labels"].get(labels.GKE_NODEPOOL_LABEL) == "gpu-pool"
    ]


def run_scale_up_journey(sim: world.BackgroundWorld, cluster: kube.KubeCluster, recorder: Recorder) -> str:
    """Create a GPU pod on an empty pool, run the clock until it runs, delete it; returns its name."""
    name = cluster.create_pod(manifest()).name
    advance_until(sim, lambda: pod_phase(sim, name) == "Running", limit=900)
    recorder.wait_for(
        "the pod Running",
        lambda seen: any(s.kind == "pod" and s.obj.get("status", {}).get("phase") == "Running" for s in seen),
    )
    cluster.delete_pod(NAMESPACE, name)
    advance_until(sim, lambda: pod_phase(sim, name) is None, limit=120)
    recorder.wait_for(
        "the pod DELETED", lambda seen: any(s.kind == "pod" and s.change == ports.DELETED for s in seen)
    )
    for reason in ("FailedScheduling", "TriggeredScaleUp", "Scheduled", "Pulling", "Started", "Killing"):
        recorder.wait_for(f"a {reason} event", has_event(name, reason))
    recorder.wait_for(
        "GPUs allocatable",
        lambda seen: any(
            s.obj["status"].get("allocatable", {}).get(labels.GPU_RESOURCE) == "1" for s in gpu_nodes(seen)
        ),
    )
    return name


def track(recorder: Recorder, name: str) -> tuple[lifecycle.Progress, list[lifecycle.Milestone]]:
    """What a tracker would build from these callbacks, through the pure converters."""
    progress, milestones = lifecycle.Progress(created=datetime(2026, 1, 1, tzinfo=UTC)), []
    for seen in list(recorder.seen):
        observation: lifecycle.Observation | None = None
        if seen.kind == "pod" and seen.name == name:
            observation = workloads.observe_pod(seen.obj, deleted=seen.change == ports.DELETED)
        elif seen.kind == "event" and (subject := workloads.event_subject(seen.obj)) and subject.name == name:
            observation = workloads.observe_event(seen.obj)
        elif seen.kind == "node" and seen.change != ports.DELETED:
            observation = workloads.observe_node(seen.obj)
        if observation is not None:
            progress, new = lifecycle.advance(progress, observation)
            milestones += new
    return progress, milestones


def test_informers_deliver_a_scale_up_from_zero(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    recorder = Recorder()
    recorder.start(cluster)
    initial = [(s.kind, s.change) for s in recorder.seen]
    assert initial == [("node", ports.ADDED)] * 2, "the initial list: the two default-pool nodes, no pods"
    name = run_scale_up_journey(sim, cluster, recorder)

    pods = [s for s in recorder.of("pod") if s.name == name]
    assert pods[0].change == ports.ADDED and pods[-1].change == ports.DELETED
    assert {s.change for s in pods[1:-1]} == {ports.MODIFIED}
    assert all(s.obj["metadata"]["labels"][labels.MANAGED_BY_LABEL] == "gpubot" for s in pods)
    assert next(s.change for s in gpu_nodes(recorder.seen)) == ports.ADDED
    assert any(not cluster_nodes.is_ready(s.obj) for s in gpu_nodes(recorder.seen)), "NotReady first"

    progress, milestones = track(recorder, name)
    steps = [m.step for m in milestones if m.step]
    # each step once (all but Kueue's admission: no Kueue here); watches of two kinds may interleave
    assert sorted(steps) == [s for s in lifecycle.Step if s is not lifecycle.Step.ADMITTED]
    news = [m.step for m in milestones if m.step and not m.late]
    assert news == sorted(news)
    assert progress.outcome is lifecycle.Outcome.DELETED and progress.pool == "gpu-pool"


def test_expired_watches_relist_and_lose_no_milestone(
    sim: world.BackgroundWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sim.run(lambda: sim.world.store.limit_history(5))
    cluster = connect(sim, tmp_path, watch_timeout_seconds=15)
    recorder = Recorder()
    try:
        with caplog.at_level(logging.INFO, logger=kube.__name__):
            recorder.start(cluster)
            name = run_scale_up_journey(sim, cluster, recorder)
    finally:
        cluster.stop()
    assert any("relisting" in r.getMessage() for r in caplog.records), "the test must actually reach a 410"
    progress, milestones = track(recorder, name)
    assert {m.step for m in milestones if m.step} >= {
        lifecycle.Step.WAITING,
        lifecycle.Step.SCALE_UP,
        lifecycle.Step.SCHEDULED,
        lifecycle.Step.RUNNING,
    }
    assert progress.outcome is lifecycle.Outcome.DELETED


def expire_the_watches(sim: world.BackgroundWorld, *, meanwhile: Callable[[], object] = lambda: None) -> None:
    """With the store's history limited, time the watches out, run `meanwhile` in the gap, then make
    enough unrelated changes that their resume version expires: every informer must relist."""

    def gap() -> None:
        sim.world.advance(10)  # the watches time out; their reconnection waits for this call to return
        meanwhile()
        for i in range(5):
            sim.world.store.create("configmaps", {"metadata": {"name": f"noise-{i}", "namespace": NAMESPACE}})

    sim.run(gap)


def test_a_pod_deleted_while_not_watching_is_reported_deleted(
    sim: world.BackgroundWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The relist's replay synthesises DELETED for what vanished during the gap."""
    sim.run(lambda: sim.world.store.limit_history(2))
    cluster = connect(sim, tmp_path, watch_timeout_seconds=5)
    recorder = Recorder()
    try:
        name = cluster.create_pod(manifest()).name
        recorder.start(cluster)

        caplog.set_level(logging.INFO, logger=kube.__name__)
        expire_the_watches(sim, meanwhile=lambda: sim.world.store.remove("pods", NAMESPACE, name))
        recorder.wait_for(
            "the pod DELETED",
            lambda seen: any(s.kind == "pod" and s.change == ports.DELETED and s.name == name for s in seen),
        )
    finally:
        cluster.stop()
    assert "Pod watch expired; relisting" in caplog.messages


def test_the_event_cache_keeps_identities_and_a_relist_still_repeats_no_event(
    sim: world.BackgroundWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Events are the most numerous objects and nobody reads a deleted one, so their informer keeps only
    what a relist needs to tell old from new; a relist after a 410 still delivers each change once."""
    sim.run(lambda: sim.world.store.limit_history(2))
    cluster = connect(sim, tmp_path, watch_timeout_seconds=5)
    recorder = Recorder()
    try:
        name = cluster.create_pod(manifest()).name
        recorder.start(cluster)
        recorder.wait_for("an event about the pod", lambda seen: bool(reasons_about(seen, name)))
        (events,) = [i for i in cluster.informers if i.source.kind == "Event"]
        assert events.cache and all(
            set(kept) == {"kind", "apiVersion", "metadata"} for kept in events.cache.values()
        )
        assert all(
            set(kept["metadata"]) <= {"name", "namespace", "uid", "resourceVersion"}
            for kept in events.cache.values()
        )
        caplog.set_level(logging.INFO, logger=kube.__name__)
        expire_the_watches(sim)
        recorder.wait_for(
            "the event watch relisted", lambda seen: "Event watch expired; relisting" in caplog.messages
        )
        relisted = len(recorder.of("event"))
        sim.advance(60, step=10)  # the scheduler retries the pending pod: new event changes, in full
        recorder.wait_for("a change after the relist", lambda seen: len(recorder.of("event")) > relisted)
    finally:
        cluster.stop()
    delivered = [
        (s.obj["metadata"]["uid"], s.obj["metadata"]["resourceVersion"]) for s in recorder.of("event")
    ]
    assert len(delivered) == len(set(delivered))  # the relist replayed nothing already delivered
    assert all("reason" in s.obj and "involvedObject" in s.obj for s in recorder.of("event"))


def test_stop_ends_every_informer_thread_and_allows_a_restart(cluster: kube.KubeCluster) -> None:
    Recorder().start(cluster)
    with pytest.raises(RuntimeError, match="already started"):
        Recorder().start(cluster)
    stopped = list(cluster.informers)
    cluster.stop()
    assert cluster.informers == [] and all(informer.join(0) for informer in stopped)
    again = Recorder()
    again.start(cluster)
    assert len(again.of("node")) == 2


def test_annotate_pod_merges_into_the_pods_annotations(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    created = cluster.create_pod(manifest())
    cluster.annotate_pod(NAMESPACE, created.name, {labels.AUDIT_ANNOTATION: "[]", "example.com/note": "hi"})
    (stored,) = [p for p in sim.pods(NAMESPACE) if p["metadata"]["name"] == created.name]
    notes = stored["metadata"]["annotations"]
    assert (notes[labels.AUDIT_ANNOTATION], notes["example.com/note"]) == ("[]", "hi")
    assert notes[labels.CHANNEL_ANNOTATION] == "C0GPU"  # a merge: the other keys stay
    fetched = cluster.get_workload(NAMESPACE, created.name)
    assert fetched is not None and fetched.audit == "[]"


def test_annotate_pod_with_a_stale_version_conflicts(
    sim: world.BackgroundWorld, cluster: kube.KubeCluster
) -> None:
    name = cluster.create_pod(manifest()).name
    sim.settle()  # the scheduler's first pass writes the pod's status; read the version after it
    read = cluster.get_workload(NAMESPACE, name)
    assert read is not None
    cluster.annotate_pod(NAMESPACE, name, {"example.com/a": "1"}, resource_version=read.resource_version)
    with pytest.raises(errors.Conflict, match="has been modified"):
        cluster.annotate_pod(NAMESPACE, name, {"example.com/a": "2"}, resource_version=read.resource_version)
    with pytest.raises(errors.NotFound, match='pods "missing" not found'):
        cluster.annotate_pod(NAMESPACE, "missing", {"example.com/a": "1"})


def test_read_log_gives_the_newest_lines_when_the_tail_asked_passes_the_byte_cap(
    sim: world.BackgroundWorld, core: client.CoreV1Api, cluster: kube.KubeCluster
) -> None:
    """The kubelet cuts `limitBytes` from the start of the tail, so one read of 6,000 lines of 200 bytes
    (1.2 MB) would end inside line 5,323; the adapter asks again for fewer, and its answer ends at the end."""
    wide = "x" * 190
    command = ["seq", "-f", f"%05g {wide}", "6000"]
    core.create_namespaced_pod(NAMESPACE, scenarios.pod("wide", command=command, restart="Never"))
    scenarios.advance_until(
        sim, lambda: core.read_namespaced_pod("wide", NAMESPACE).status.phase == "Succeeded", limit=30, step=1
    )
    cut = core.read_namespaced_pod_log("wide", NAMESPACE, tail_lines=6000, limit_bytes=kube.LOG_LIMIT_BYTES)
    assert not cut.endswith(f"06000 {wide}\n"), "the API server keeps the oldest of the tail"

    output = cluster.read_log(NAMESPACE, "wide", tail_lines=6000)
    lines = output.splitlines()
    assert len(output.encode()) < kube.LOG_LIMIT_BYTES and output.endswith("\n")
    assert 4000 < len(lines) < 5300
    assert lines == [f"{n:05d} {wide}" for n in range(6001 - len(lines), 6001)]
    assert cluster.read_log(NAMESPACE, "wide", tail_lines=3) == "".join(
        f"{n:05d} {wide}\n" for n in (5998, 5999, 6000)
    ), "under the cap, one read"
