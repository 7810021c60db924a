"""`kubectl debug` against the embedded cluster: ephemeral containers, node debugging pods, and the
apiserver's answer where the sim stops (it serves no pods/attach)."""

from __future__ import annotations

import pytest
import requests
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.cluster import errors, world
from sim.cluster.store import Obj
from tests.sim.test_kubectl import Kubectl, wait_for_pod
from tests.sim.test_kubectl_drain import live_kubectl, live_sim, node_names, pod_manifest
from tests.sim.test_scenarios import pod

__all__ = ["live_kubectl", "live_sim"]  # fixtures shared with the drain tests


def stored_pod(sim: world.BackgroundWorld, name: str) -> Obj:
    found = sim.run(lambda: sim.world.store.get("pods", "default", name))
    assert found is not None
    return found


def running_pod(sim: world.BackgroundWorld, kubectl: Kubectl, name: str) -> str:
    """A plain pod on the first node, Running."""
    node = node_names(sim)[0]
    kubectl.ok("apply", "-f", "-", stdin=pod_manifest(name, node))
    wait_for_pod(sim, name, lambda p: p is not None and p["status"].get("phase") == "Running")
    return node


def test_debug_pod_adds_an_ephemeral_container_the_kubelet_starts(
    live_sim: world.BackgroundWorld, live_kubectl: Kubectl
) -> None:
    running_pod(live_sim, live_kubectl, "web")
    result = live_kubectl.run("debug", "pod/web", "--image=busybox", "--container=dbg", "--", "true")
    assert result.returncode == 0, result.stderr
    assert "panic" not in result.stderr
    [added] = stored_pod(live_sim, "web")["spec"]["ephemeralContainers"]
    assert (added["name"], added["image"], added["command"]) == ("dbg", "busybox", ["true"])

    def started(found: Obj | None) -> bool:
        statuses = (found or {}).get("status", {}).get("ephemeralContainerStatuses") or []
        return any("running" in s["state"] for s in statuses)

    wait_for_pod(live_sim, "web", started)
    described = live_kubectl.ok("describe", "pod", "web")
    assert "Ephemeral Containers:" in described and "  dbg:" in described
    assert "Created container: dbg" in described and "Started container dbg" in described


def test_debug_pod_interactively_meets_a_refusing_kubelet_and_no_crash(
    live_sim: world.BackgroundWorld, live_kubectl: Kubectl
) -> None:
    running_pod(live_sim, live_kubectl, "web")
    result = live_kubectl.run("debug", "-it", "pod/web", "--image=busybox", "--container=dbg", stdin="")
    assert "panic" not in result.stderr and "Traceback" not in result.stderr
    # no stream can be attached: the kubelet refuses it (sim/cluster/streaming.py), and kubectl reads logs
    assert "falling back to streaming logs: error dialing backend: dial tcp 10.128." in result.stderr
    assert result.returncode == 0, result.stderr


def test_debug_node_creates_a_host_pod_on_that_node(
    live_sim: world.BackgroundWorld, live_kubectl: Kubectl
) -> None:
    node = node_names(live_sim)[0]
    result = live_kubectl.run("debug", f"node/{node}", "--image=busybox")
    assert result.returncode == 0, result.stderr
    [name] = [
        p["metadata"]["name"]
        for p in live_sim.run(lambda: list(live_sim.world.store.items("pods", "default")))
        if p["metadata"]["name"].startswith(f"node-debugger-{node}-")
    ]
    spec = stored_pod(live_sim, name)["spec"]
    assert (spec["nodeName"], spec["hostPID"], spec["hostNetwork"], spec["restartPolicy"]) == (
        node,
        True,
        True,
        "Never",
    )
    assert spec["volumes"] == [{"name": "host-root", "hostPath": {"path": "/"}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "host-root", "mountPath": "/host"}]


def test_existing_ephemeral_containers_may_not_be_removed_or_changed(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod("web"))
    sim.advance(10)
    debug = {"name": "dbg", "image": "busybox", "stdin": True, "tty": True}
    patch = {"spec": {"ephemeralContainers": [debug]}}
    core.patch_namespaced_pod_ephemeralcontainers("web", "default", patch)
    before = stored_pod(sim, "web")
    for changed in ([], [{**debug, "image": "alpine"}]):
        body = {**before, "spec": {**before["spec"], "ephemeralContainers": changed}}
        with pytest.raises(ApiException) as refused:
            core.replace_namespaced_pod_ephemeralcontainers("web", "default", body)
        assert refused.value.status == 422
        verb = "removed" if not changed else "changed"
        assert f'existing ephemeral containers \\"dbg\\" may not be {verb}' in refused.value.body
    assert stored_pod(sim, "web")["spec"]["ephemeralContainers"] == [debug]


def test_an_ephemeral_container_named_like_another_or_without_image_is_refused(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod("web"))
    for bad, detail in (
        ({"name": "main", "image": "busybox"}, 'Duplicate value: \\"main\\"'),
        ({"name": "dbg"}, "spec.ephemeralContainers[0].image"),
        ({"name": "dbg", "image": "busybox", "ports": [{"containerPort": 80}]}, "Ephemeral Container"),
    ):
        with pytest.raises(ApiException) as refused:
            core.patch_namespaced_pod_ephemeralcontainers(
                "web", "default", {"spec": {"ephemeralContainers": [bad]}}
            )
        assert refused.value.status == 422 and detail in refused.value.body
    assert "ephemeralContainers" not in stored_pod(sim, "web")["spec"]


def test_a_path_nothing_serves_is_answered_as_the_apiserver_does(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod("web"))
    answer = requests.post(f"{sim.url}/api/v1/namespaces/default/pods/web/frobnicate", timeout=10)
    assert (answer.status_code, answer.text) == (404, errors.PAGE_NOT_FOUND)
    assert answer.headers["Content-Type"].startswith("text/plain")
