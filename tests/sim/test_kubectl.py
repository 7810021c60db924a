"""The real kubectl against the embedded cluster: the seed tutorial's commands, output as on GKE."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from sim import seed
from sim.cluster import world
from sim.cluster.store import Obj

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:
    pytest.skip("kubectl is not installed", allow_module_level=True)

TIMEOUT = 30.0
"""Real seconds any one kubectl call may take; generous, since each run does discovery afresh."""

SCALE_UP_SECONDS = 400
"""Simulated seconds from creating the GPU pod to it running on a new node (30 + 90 + 30 + 120 + 90)."""

HELLO_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: hello
  labels:
    app: hello
spec:
  containers:
  - name: web
    image: nginx:1.27
"""

SCALE_UP_EVENTS = [
    ("Warning", "FailedScheduling", "default-scheduler"),
    ("Normal", "TriggeredScaleUp", "cluster-autoscaler"),
    ("Normal", "Scheduled", "default-scheduler"),
    ("Normal", "Pulling", "kubelet"),
    ("Normal", "Pulled", "kubelet"),
    ("Normal", "Created", "kubelet"),
    ("Normal", "Started", "kubelet"),
]


@dataclass(frozen=True)
class Kubectl:
    kubeconfig: Path
    cache_dir: Path
    home: Path

    def argv(self, *args: str) -> list[str]:
        return [str(KUBECTL), f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}", *args]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["HOME"] = str(self.home)
        return env

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=self.env(),
            check=False,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env()
        )


class Lines:
    """Lines a long-running kubectl prints, read on a thread so the test can wait with a bound."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, pattern: str, timeout: float = TIMEOUT) -> str:
        while True:
            line = self._queue.get(timeout=timeout)
            if line is None:
                raise AssertionError(f"kubectl ended before printing {pattern!r}; it printed {self.seen}")
            self.seen.append(line)
            if re.search(pattern, line):
                return line

    def stop(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=TIMEOUT)


@pytest.fixture
def manifests(tmp_path: Path) -> dict[str, Path]:
    files = {"seed": seed.SEED_MANIFEST, "corrected": seed.CORRECTED_MANIFEST, "hello": HELLO_MANIFEST}
    out = {}
    for name, text in files.items():
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(text)
    return out


def table(output: str) -> list[list[str]]:
    """kubectl's tabwriter output as cells; columns are at least two spaces apart."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.splitlines() if line.strip()]


def gpu_node(sim: world.BackgroundWorld) -> str:
    names = [str(n["metadata"]["name"]) for n in sim.nodes() if "-gpu-pool-" in n["metadata"]["name"]]
    assert len(names) == 1, names
    return names[0]


def describe_events(output: str) -> list[list[str]]:
    """The rows of describe's Events section: Type, Reason, Age, From, Message."""
    section = output.split("\nEvents:", 1)[1]
    lines = section.splitlines()[3:]
    return [re.split(r"\s{2,}", line.strip(), maxsplit=4) for line in lines if line.strip()]


def wait_for_pod(sim: world.BackgroundWorld, name: str, condition: Callable[[Obj | None], bool]) -> None:
    """Block until the pod satisfies `condition`, re-checking on each store change (no polling, no sleep)."""
    store = sim.world.store

    async def waiter() -> None:
        watcher = store.watch("pods", "default")
        try:
            while not condition(store.get("pods", "default", name)):
                change = await asyncio.wait_for(watcher.queue.get(), TIMEOUT / 2)
                assert change is not None, "the store closed its watches"
        finally:
            store.unwatch(watcher)

    sim.call(waiter)


@pytest.fixture
def running_gpu_pod(sim: world.BackgroundWorld, kubectl: Kubectl, manifests: dict[str, Path]) -> str:
    """The corrected seed pod, created and carried through the scale-up; returns the new node's name."""
    kubectl.ok("create", "-f", str(manifests["corrected"]))
    sim.advance(SCALE_UP_SECONDS)
    return gpu_node(sim)


# -- discovery and reads ------------------------------------------------------------------------------


def test_version_reports_the_gke_server_without_a_skew_warning(kubectl: Kubectl) -> None:
    result = kubectl.run("version")
    assert result.returncode == 0, result.stderr
    assert "Server Version: v1.32.10-gke.1000" in result.stdout
    assert "Client Version: v1.32" in result.stdout
    assert "WARNING" not in result.stderr


def test_get_nodes_lists_the_two_ready_default_pool_nodes(kubectl: Kubectl) -> None:
    header, *rows = table(kubectl.ok("get", "nodes"))
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(rows) == 2
    for name, status, roles, age, version in rows:
        assert re.fullmatch(r"gke-demo-default-pool-[0-9a-f]{8}-[0-9a-z]{4}", name)
        assert (status, roles, age, version) == ("Ready", "<none>", "0s", "v1.32.10-gke.1000")


def test_get_nodes_wide_shows_addresses_os_and_runtime(kubectl: Kubectl) -> None:
    header, *rows = table(kubectl.ok("get", "nodes", "-o", "wide"))
    assert header == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    for row in rows:
        assert re.fullmatch(r"10\.\d+\.\d+\.\d+", row[5])
        assert row[7] == "Container-Optimized OS from Google"
        assert row[9].startswith("containerd://")


def test_get_autoscaler_status_configmap_as_yaml(
    sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str
) -> None:
    configmap = yaml.safe_load(
        kubectl.ok("get", "configmap", "-n", "kube-system", "cluster-autoscaler-status", "-o", "yaml")
    )
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["name"] == "cluster-autoscaler-status"
    status = yaml.safe_load(configmap["data"]["status"])
    assert status["autoscalerStatus"] == "Running"
    assert status["clusterWide"]["health"]["nodeCounts"]["registered"]["ready"] == 3
    (group,) = status["nodeGroups"]
    assert group["name"].endswith("/instanceGroups/gke-demo-gpu-pool-grp")
    assert (
        group["health"]["cloudProviderTarget"],
        group["health"]["minSize"],
        group["health"]["maxSize"],
    ) == (1, 0, 5)


# -- creating the seed pod ----------------------------------------------------------------------------


def test_create_published_manifest_is_refused_by_strict_decoding(
    kubectl: Kubectl, manifests: dict[str, Path]
) -> None:
    result = kubectl.run("create", "-f", str(manifests["seed"]))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f'Error from server (BadRequest): error when creating "{manifests["seed"]}": Pod in version "v1" '
        'cannot be handled as a Pod: strict decoding error: unknown field "spec.tolerations[0].important"'
    )


def test_create_published_manifest_without_validation_is_invalid(
    kubectl: Kubectl, manifests: dict[str, Path]
) -> None:
    result = kubectl.run("create", "-f", str(manifests["seed"]), "--validate=false")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'The Pod "gpu-pod" is invalid: spec.tolerations[0].operator: Invalid value: "Equal": operator must '
        'be Exists when `key` is empty, which means "match all values and all keys"'
    )


def test_create_corrected_manifest_makes_a_pending_pod(kubectl: Kubectl, manifests: dict[str, Path]) -> None:
    assert kubectl.ok("create", "-f", str(manifests["corrected"])) == "pod/gpu-pod created\n"
    assert table(kubectl.ok("get", "pods")) == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        ["gpu-pod", "0/1", "Pending", "0", "0s"],
    ]
    again = kubectl.run("create", "-f", str(manifests["corrected"]))
    assert again.returncode == 1
    assert "Error from server (AlreadyExists): error when creating" in again.stderr
    assert 'pods "gpu-pod" already exists' in again.stderr


def test_apply_creates_then_is_unchanged_then_configures_an_edited_label(
    kubectl: Kubectl, manifests: dict[str, Path]
) -> None:
    hello = manifests["hello"]
    assert kubectl.ok("apply", "-f", str(hello)) == "pod/hello created\n"
    assert kubectl.ok("apply", "-f", str(hello)) == "pod/hello unchanged\n"
    hello.write_text(HELLO_MANIFEST.replace("app: hello", "app: hello\n    tier: web"))
    assert kubectl.ok("apply", "-f", str(hello)) == "pod/hello configured\n"
    labels = kubectl.ok("get", "pod", "hello", "-o", "jsonpath={.metadata.labels}")
    assert yaml.safe_load(labels) == {"app": "hello", "tier": "web"}
    applied = kubectl.ok(
        "get",
        "pod",
        "hello",
        "-o",
        r"jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}",
    )
    assert yaml.safe_load(applied)["metadata"]["labels"] == {"app": "hello", "tier": "web"}


def test_reapplying_the_gpu_pod_hits_the_tolerations_update_rule(
    kubectl: Kubectl, manifests: dict[str, Path]
) -> None:
    # Upstream too: tolerations are a replace-list in strategic merge, so the re-apply patch drops the
    # tolerations admission added (not-ready, unreachable, nvidia.com/gpu), which pod updates forbid.
    assert kubectl.ok("apply", "-f", str(manifests["corrected"])) == "pod/gpu-pod created\n"
    result = kubectl.run("apply", "-f", str(manifests["corrected"]))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'The Pod "gpu-pod" is invalid: spec.tolerations: Forbidden: existing toleration can not be modified '
        "except its tolerationSeconds"
    )


# -- the scale-up, seen through kubectl ---------------------------------------------------------------


def test_scale_up_as_kubectl_sees_it(
    sim: world.BackgroundWorld, kubectl: Kubectl, manifests: dict[str, Path]
) -> None:
    kubectl.ok("create", "-f", str(manifests["corrected"]))

    def pod_row() -> list[str]:
        return table(kubectl.ok("get", "pods", "-o", "wide"))[1]

    def gpu_nodes() -> list[list[str]]:
        return [row for row in table(kubectl.ok("get", "nodes"))[1:] if "-gpu-pool-" in row[0]]

    sim.advance(60)
    assert pod_row()[1:3] == ["0/1", "Pending"]
    assert gpu_nodes() == []
    sim.advance(70)  # t=130: the VM has booted and registered, not yet Ready
    (node,) = gpu_nodes()
    assert re.fullmatch(r"gke-demo-gpu-pool-[0-9a-f]{8}-[0-9a-z]{4}", node[0])
    assert node[1] == "NotReady"
    sim.advance(70)  # t=200: Ready, but the device plugin has not registered the GPU
    assert gpu_nodes()[0][1] == "Ready"
    allocatable = r"jsonpath={.status.allocatable.nvidia\.com/gpu}"
    assert kubectl.ok("get", "node", node[0], "-o", allocatable) == ""
    assert pod_row()[1:3] == ["0/1", "Pending"]
    sim.advance(100)  # t=300: GPU allocatable, pod bound and pulling its 3.9 GB image
    assert kubectl.ok("get", "node", node[0], "-o", allocatable) == "1"
    row = pod_row()
    assert row[1:3] == ["0/1", "ContainerCreating"]
    assert row[6] == node[0]
    sim.advance(SCALE_UP_SECONDS - 300)
    row = pod_row()
    assert row[:5] == ["gpu-pod", "1/1", "Running", "0", "6m40s"]
    assert row[6] == node[0]
    assert [r[1] for r in table(kubectl.ok("get", "nodes"))[1:]] == ["Ready"] * 3


def test_describe_pod_shows_scale_up_events_in_order(
    sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str
) -> None:
    output = kubectl.ok("describe", "pod", "gpu-pod")
    assert re.search(r"^Status:\s+Running$", output, re.M)
    assert re.search(rf"^Node:\s+{running_gpu_pod}/10\.\d+\.\d+\.\d+$", output, re.M)
    assert re.search(r"^Node-Selectors:\s+app-type=gpu-workloads$", output, re.M)
    tolerations = output.split("Tolerations:", 1)[1].split("Events:", 1)[0].split("\n")
    assert [line.strip() for line in tolerations if line.strip()] == [
        "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
        "node.kubernetes.io/unreachable:NoExecute op=Exists for 300s",
        "nvidia.com/gpu=present:NoSchedule",
        "nvidia.com/gpu:NoSchedule op=Exists",
    ]
    assert re.search(r"^\s+nvidia\.com/gpu:\s+1$", output.split("Limits:", 1)[1], re.M)

    rows = describe_events(output)
    messages = {(row[1], row[4]) for row in rows}
    image = "nvidia/cuda:12.2.0-base-ubuntu22.04"
    assert (
        "TriggeredScaleUp",
        "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/demo/"
        "zones/local-a/instanceGroups/gke-demo-gpu-pool-grp 0->1 (max: 5)}]",
    ) in messages
    assert (
        "FailedScheduling",
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    ) in messages
    assert ("Scheduled", f"Successfully assigned default/gpu-pod to {running_gpu_pod}") in messages
    assert ("Pulling", f'Pulling image "{image}"') in messages
    assert (
        "Pulled",
        f'Successfully pulled image "{image}" in 1m30s (1m30s including waiting). '
        "Image size: 3900000000 bytes.",
    ) in messages
    assert ("Created", "Created container: cuda-container") in messages
    assert ("Started", "Started container cuda-container") in messages
    assert any(row[1] == "FailedScheduling" and "(x2 over " in row[2] for row in rows)

    # describe sorts by last timestamp: the scheduler's repeated FailedScheduling is bumped past the
    # scale-up, and its last one (the node still tainted not-ready) precedes Scheduled.
    seen = [(row[0], row[1], row[3]) for row in rows]
    assert set(seen) == set(SCALE_UP_EVENTS)
    first = {event: seen.index(event) for event in SCALE_UP_EVENTS}
    last = {event: len(seen) - 1 - seen[::-1].index(event) for event in SCALE_UP_EVENTS}
    failed, triggered, scheduled, pulling, pulled, created, started = SCALE_UP_EVENTS
    assert first[failed] == 0 or first[triggered] == 0
    assert last[failed] < first[scheduled] and first[triggered] < first[scheduled]
    assert first[scheduled] < first[pulled] and first[pulling] < first[pulled]
    # Pulled, Created and Started share one second; their order then is the list's (event name) order.
    assert {pulled, created, started} == set(seen[-3:])


def test_describe_gpu_node_lists_the_pod_and_its_gpu(
    sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str
) -> None:
    output = kubectl.ok("describe", "node", running_gpu_pod)
    assert re.search(r"^Taints:\s+nvidia\.com/gpu=present:NoSchedule$", output, re.M)
    assert re.search(r"^Labels:\s+app-type=gpu-workloads$", output, re.M)
    allocatable = output.split("\nAllocatable:", 1)[1].split("\nSystem Info:", 1)[0]
    assert re.search(r"^\s+nvidia\.com/gpu:\s+1$", allocatable, re.M)
    pods = output.split("\nNon-terminated Pods:", 1)[1].split("\nAllocated resources:", 1)[0]
    assert "(1 in total)" in pods
    assert re.search(r"^\s+default\s+gpu-pod\s+0 \(0%\)\s+0 \(0%\)\s+0 \(0%\)\s+0 \(0%\)", pods, re.M)
    allocated = output.split("\nAllocated resources:", 1)[1].split("\nEvents:", 1)[0]
    assert re.search(r"^\s+nvidia\.com/gpu\s+1\s+1$", allocated, re.M)
    reasons = [row[1] for row in describe_events(output)]
    assert {"Starting", "RegisteredNode", "NodeReady"} <= set(reasons)


def test_describe_default_node_does_not_list_the_gpu_pod(
    sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str
) -> None:
    default = next(n["metadata"]["name"] for n in sim.nodes() if "-default-pool-" in n["metadata"]["name"])
    output = kubectl.ok("describe", "node", default)
    assert "Non-terminated Pods:          (0 in total)" in output
    assert "gpu-pod" not in output


def test_get_events_for_the_pod_by_field_selector(
    sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str
) -> None:
    header, *rows = table(kubectl.ok("get", "events", "--field-selector", "involvedObject.name=gpu-pod"))
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert {row[3] for row in rows} == {"pod/gpu-pod"}
    assert {row[2] for row in rows} == {reason for _, reason, _ in SCALE_UP_EVENTS}
    everything = table(kubectl.ok("get", "events"))[1:]
    assert any(row[3] == f"node/{running_gpu_pod}" for row in everything)
    assert len(everything) > len(rows)


# -- writes and watches -------------------------------------------------------------------------------


def test_label_and_annotate(kubectl: Kubectl, manifests: dict[str, Path]) -> None:
    kubectl.ok("create", "-f", str(manifests["corrected"]))
    assert kubectl.ok("label", "pod", "gpu-pod", "team=ml") == "pod/gpu-pod labeled\n"
    assert kubectl.ok("annotate", "pod", "gpu-pod", "owner=alice") == "pod/gpu-pod annotated\n"
    assert table(kubectl.ok("get", "pods", "-l", "team=ml", "--show-labels"))[1][-1] == "team=ml"
    assert kubectl.ok("get", "pods", "-l", "team=other") == ""
    assert kubectl.ok("get", "pod", "gpu-pod", "-o", "jsonpath={.metadata.annotations.owner}") == "alice"

    refused = kubectl.run("label", "pod", "gpu-pod", "team=infra")
    assert refused.returncode == 1
    assert "'team' already has a value (ml), and --overwrite is false" in refused.stderr
    assert kubectl.ok("label", "pod", "gpu-pod", "team=infra", "--overwrite") == "pod/gpu-pod labeled\n"
    assert kubectl.ok("label", "pod", "gpu-pod", "team-") == "pod/gpu-pod unlabeled\n"
    assert kubectl.ok("get", "pod", "gpu-pod", "-o", "jsonpath={.metadata.labels}") == ""


def test_get_pods_watch_prints_rows_as_the_pod_changes(
    sim: world.BackgroundWorld, kubectl: Kubectl, manifests: dict[str, Path]
) -> None:
    kubectl.ok("create", "-f", str(manifests["corrected"]))
    watch = Lines(kubectl.popen("get", "pods", "-w"))
    try:
        assert re.split(r"\s{2,}", watch.until(r"^NAME")) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert re.split(r"\s+", watch.until(r"^gpu-pod")) == ["gpu-pod", "0/1", "Pending", "0", "0s"]
        sim.advance(SCALE_UP_SECONDS)
        watch.until(r"^gpu-pod\s+0/1\s+ContainerCreating\s")
        watch.until(r"^gpu-pod\s+1/1\s+Running\s")
        kubectl.ok("delete", "pod", "gpu-pod", "--wait=false")
        watch.until(r"^gpu-pod\s+1/1\s+Terminating\s")
    finally:
        watch.stop()
    assert all(line.startswith("gpu-pod ") for line in watch.seen[1:])


def test_delete_pod_waits_for_the_kubelet_to_finish(
    sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str
) -> None:
    delete = kubectl.popen("delete", "pod", "gpu-pod")
    wait_for_pod(sim, "gpu-pod", lambda pod: pod is None or "deletionTimestamp" in pod["metadata"])
    assert delete.poll() is None, "kubectl delete returned before the pod was gone"
    terminating = table(kubectl.ok("get", "pods"))[1]
    assert terminating[:3] == ["gpu-pod", "1/1", "Terminating"]
    sim.advance(31)  # `sleep` ignores SIGTERM, so the kubelet kills it when the 30 s grace period ends
    out, err = delete.communicate(timeout=TIMEOUT)
    assert (delete.returncode, out, err) == (0, 'pod "gpu-pod" deleted\n', "")
    gone = kubectl.run("get", "pods")
    assert (gone.stdout, gone.stderr) == ("", "No resources found in default namespace.\n")
    assert sim.pods() == []


def test_wait_for_delete(sim: world.BackgroundWorld, kubectl: Kubectl, running_gpu_pod: str) -> None:
    assert kubectl.ok("delete", "pod", "gpu-pod", "--wait=false") == 'pod "gpu-pod" deleted\n'
    early = kubectl.run("wait", "--for=delete", "pod/gpu-pod", "--timeout=1s")
    assert early.returncode == 1
    assert "timed out waiting for the condition on pods/gpu-pod" in early.stderr
    waiting = kubectl.popen("wait", "--for=delete", "pod/gpu-pod", f"--timeout={int(TIMEOUT)}s")
    sim.advance(31)
    _, err = waiting.communicate(timeout=TIMEOUT)
    assert waiting.returncode == 0, err
    assert sim.pods() == []
    assert kubectl.ok("wait", "--for=delete", "pod/gpu-pod", "--timeout=1s") == ""
