"""Everyday kubectl against the embedded cluster: drain, cordon, node Leases, server-side apply.

Drain runs on a cluster whose clock follows the wall clock (60x), as under `gpubot sim`: kubectl waits
in real time for evicted pods to go, which a manual clock would never let happen.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sim.cluster import world
from sim.cluster.store import Obj
from tests.sim.test_kubectl import Kubectl, table, wait_for_pod

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

PDB_MANIFEST = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: guard
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: guarded
"""


def pod_manifest(name: str, node: str, app: str = "plain") -> str:
    """A bare pod pinned to one node, as drain meets pods that declare no controller."""
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
    app: {app}
spec:
  nodeSelector:
    kubernetes.io/hostname: {node}
  containers:
  - name: main
    image: busybox:1.36
    command: ["sleep", "3600"]
"""


@pytest.fixture
def live_sim() -> Iterator[world.BackgroundWorld]:
    with world.BackgroundWorld(world.WorldConfig(speed=60)) as running:
        yield running


def kubectl_for(sim: world.BackgroundWorld, tmp_path: Path) -> Kubectl:
    config = tmp_path / "kubeconfig"
    world.write_kubeconfig(config, sim.url)
    return Kubectl(config, tmp_path / "cache", tmp_path)


@pytest.fixture
def live_kubectl(live_sim: world.BackgroundWorld, tmp_path: Path) -> Kubectl:
    return kubectl_for(live_sim, tmp_path)


@pytest.fixture
def kubectl(sim: world.BackgroundWorld, tmp_path: Path) -> Kubectl:
    return kubectl_for(sim, tmp_path)


def node_names(sim: world.BackgroundWorld) -> list[str]:
    return sorted(str(n["metadata"]["name"]) for n in sim.nodes())


def node(sim: world.BackgroundWorld, name: str) -> Obj:
    found = sim.run(lambda: sim.world.store.get("nodes", "", name))
    assert found is not None
    return found


def is_running(pod: Obj | None) -> bool:
    return bool(pod and pod.get("status", {}).get("phase") == "Running")


def run_pods(sim: world.BackgroundWorld, kubectl: Kubectl, *pods: tuple[str, str, str]) -> None:
    """Create (name, node, app) pods and wait until each runs."""
    for name, on, app in pods:
        kubectl.ok("create", "-f", "-", stdin=pod_manifest(name, on, app))
    for name, _, _ in pods:
        wait_for_pod(sim, name, is_running)


def cordon_taints(node_obj: Obj) -> list[dict[str, str]]:
    return [t for t in node_obj["spec"].get("taints") or [] if t["key"] == UNSCHEDULABLE_TAINT]


# -- drain --------------------------------------------------------------------------------------------


def test_drain_evicts_the_nodes_pods_and_leaves_it_cordoned_and_tainted(
    live_sim: world.BackgroundWorld, live_kubectl: Kubectl
) -> None:
    drained, other = node_names(live_sim)
    run_pods(live_sim, live_kubectl, ("a", drained, "plain"), ("b", drained, "plain"), ("c", other, "plain"))

    result = live_kubectl.run("drain", drained, "--ignore-daemonsets", "--force")

    assert result.returncode == 0, result.stderr
    assert f"node/{drained} cordoned" in result.stdout
    assert "pod/a evicted" in result.stdout and "pod/b evicted" in result.stdout
    assert f"node/{drained} drained" in result.stdout
    warning = "Warning: deleting Pods that declare no controller: default/a, default/b"
    assert warning in result.stdout + result.stderr
    assert sorted(p["metadata"]["name"] for p in live_sim.pods()) == ["c"]
    after = node(live_sim, drained)
    assert after["spec"]["unschedulable"] is True
    (taint,) = cordon_taints(after)
    assert taint["effect"] == "NoSchedule" and taint["timeAdded"]


def test_drain_without_eviction_deletes_through_a_protobuf_delete(
    live_sim: world.BackgroundWorld, live_kubectl: Kubectl
) -> None:
    drained, _ = node_names(live_sim)
    run_pods(live_sim, live_kubectl, ("a", drained, "plain"))

    result = live_kubectl.run("drain", drained, "--ignore-daemonsets", "--force", "--disable-eviction")

    assert result.returncode == 0, result.stderr
    assert "pod/a deleted" in result.stdout
    assert live_sim.pods() == []


def test_a_disruption_budget_stops_drain_with_the_apiservers_words(
    live_sim: world.BackgroundWorld, live_kubectl: Kubectl
) -> None:
    drained, _ = node_names(live_sim)
    run_pods(live_sim, live_kubectl, ("guarded", drained, "guarded"))
    live_kubectl.ok("create", "-f", "-", stdin=PDB_MANIFEST)

    result = live_kubectl.run("drain", drained, "--ignore-daemonsets", "--force", "--timeout=3s")

    assert result.returncode == 1
    assert (
        'error when evicting pods/"guarded" -n "default" (will retry after 5s): '
        "Cannot evict pod as it would violate the pod's disruption budget." in result.stderr
    )
    assert [p["metadata"]["name"] for p in live_sim.pods()] == ["guarded"]
    header, row = table(live_kubectl.ok("get", "pdb"))
    assert header == ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
    assert row[:4] == ["guard", "1", "N/A", "0"]


# -- cordon, leases, apply (manual clock) -------------------------------------------------------------


def test_cordon_adds_the_unschedulable_taint_and_uncordon_removes_it(
    sim: world.BackgroundWorld, kubectl: Kubectl
) -> None:
    cordoned, open_node = node_names(sim)

    kubectl.ok("cordon", cordoned)
    sim.settle()
    (taint,) = cordon_taints(node(sim, cordoned))
    assert taint == {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": taint["timeAdded"]}
    kubectl.ok("create", "-f", "-", stdin=pod_manifest("held", cordoned))
    kubectl.ok("create", "-f", "-", stdin=pod_manifest("free", open_node))
    sim.advance(5)
    pods = {p["metadata"]["name"]: p for p in sim.pods()}
    assert pods["held"]["spec"].get("nodeName") is None
    assert "node(s) were unschedulable" in pods["held"]["status"]["conditions"][0]["message"]
    assert pods["free"]["spec"]["nodeName"] == open_node

    kubectl.ok("uncordon", cordoned)
    sim.settle()
    assert cordon_taints(node(sim, cordoned)) == []
    assert "unschedulable" not in node(sim, cordoned)["spec"]


def test_every_node_has_a_lease_its_kubelet_renews(sim: world.BackgroundWorld, kubectl: Kubectl) -> None:
    names = node_names(sim)
    leases = yaml.safe_load(kubectl.ok("get", "leases", "-n", "kube-node-lease", "-o", "yaml"))["items"]
    assert sorted(lease["metadata"]["name"] for lease in leases) == names
    first = leases[0]
    assert first["spec"]["holderIdentity"] == first["metadata"]["name"]
    assert first["spec"]["leaseDurationSeconds"] == 40
    (owner,) = first["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Node", first["metadata"]["name"])

    sim.advance(10)
    renewed = yaml.safe_load(
        kubectl.ok("get", "lease", "-n", "kube-node-lease", first["metadata"]["name"], "-o", "yaml")
    )
    before = sim.world.clock.from_stamp(first["spec"]["renewTime"])
    after = sim.world.clock.from_stamp(renewed["spec"]["renewTime"])
    assert after - before == 10
    assert "Lease:" in kubectl.ok("describe", "node", first["metadata"]["name"])


def test_server_side_apply_creates_then_updates_with_its_field_manager(kubectl: Kubectl) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: {mode}\n"

    assert kubectl.ok("apply", "--server-side", "-f", "-", stdin=manifest.format(mode="a")).strip() == (
        "configmap/settings serverside-applied"
    )
    kubectl.ok("apply", "--server-side", "-f", "-", stdin=manifest.format(mode="b"))

    stored = yaml.safe_load(kubectl.ok("get", "configmap", "settings", "-o", "yaml", "--show-managed-fields"))
    assert stored["data"] == {"mode": "b"}
    (entry,) = stored["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["fieldsV1"]) == (
        "kubectl",
        "Apply",
        {"f:data": {"f:mode": {}}},
    )


def test_create_generators_send_protobuf_bodies_the_sim_reads(
    sim: world.BackgroundWorld, kubectl: Kubectl
) -> None:
    kubectl.ok("create", "namespace", "team-a")
    kubectl.ok("create", "configmap", "settings", "-n", "team-a", "--from-literal=mode=fast")
    kubectl.ok(
        "create", "pdb", "guard", "-n", "team-a", "--selector=app=web,tier in (a,b)", "--min-available=50%"
    )

    store = sim.world.store
    namespace = sim.run(lambda: store.get("namespaces", "", "team-a"))
    configmap = sim.run(lambda: store.get("configmaps", "team-a", "settings"))
    pdb = sim.run(lambda: store.get("poddisruptionbudgets", "team-a", "guard"))
    assert namespace is not None and configmap is not None and pdb is not None
    assert configmap["data"] == {"mode": "fast"}
    assert pdb["spec"] == {
        "minAvailable": "50%",
        "selector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
        },
    }
