"""Without the chart's opt-in to list pods in every namespace, the drain diagnosis reads the workload
namespace: the real client against a loopback API that answers the all-namespaces list as RBAC would."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.adapters import kube
from sim.cluster import world
from tests.sim import routes_server

NAMESPACE = "gpubot-workloads"
RBAC_REFUSAL = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'pods is forbidden: User "system:serviceaccount:gpubot:gpubot" cannot list resource "pods" '
    'in API group "" at the cluster scope',
    "reason": "Forbidden",
    "details": {"kind": "pods"},
    "code": 403,
}
"""The RBAC authorizer's refusal, as the API server words it."""


def pod(name: str, node: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"nodeName": node, "containers": []}}


def routes(hits: Counter[str]) -> list[web.RouteDef]:
    async def everywhere(request: web.Request) -> web.Response:
        hits["all namespaces"] += 1
        return web.json_response(RBAC_REFUSAL, status=403)

    async def workloads(request: web.Request) -> web.Response:
        hits[request.query.get("fieldSelector", "")] += 1
        node = request.query.get("fieldSelector", "").removeprefix("spec.nodeName=")
        body = {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "7"},
            "items": [pod("nb", node)],
        }
        return web.json_response(body)

    return [web.get("/api/v1/pods", everywhere), web.get(f"/api/v1/namespaces/{NAMESPACE}/pods", workloads)]


def test_a_403_on_every_namespace_falls_back_to_the_workload_namespace_once(tmp_path: Path) -> None:
    hits: Counter[str] = Counter()
    with routes_server.serve(routes(hits)) as url:
        kubeconfig = tmp_path / "kubeconfig"
        world.write_kubeconfig(kubeconfig, url)
        cluster = kube.KubeCluster.from_kubeconfig(str(kubeconfig), namespace=NAMESPACE)
        first = cluster.list_pods_on_nodes(["gpu-1"])
        second = cluster.list_pods_on_nodes(["gpu-1", "gpu-2"])
    assert [(p["metadata"]["namespace"], p["spec"]["nodeName"]) for p in first] == [(NAMESPACE, "gpu-1")]
    assert [p["spec"]["nodeName"] for p in second] == ["gpu-1", "gpu-2"]
    # Refused once, then never asked again: one 403 per replica, not one per drain check.
    assert hits == Counter({"all namespaces": 1, "spec.nodeName=gpu-1": 2, "spec.nodeName=gpu-2": 1})
