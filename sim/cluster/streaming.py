"""`pods/exec`, `pods/attach` and `pods/portforward`: the apiserver's connect subresources, answered as a
cluster whose kubelets refuse streaming connections.

The sim runs no processes, so there is nothing to attach a terminal or forward a port to. Rather than a
bare 404, each request gets what a real apiserver answers, checked in its order (kubernetes/kubernetes,
pkg/registry/core/pod/rest/subresources.go and pkg/registry/core/pod/strategy.go streamLocation /
PortForwardLocation, read at master 008b365; unchanged in substance since v1.20): the pod is read (404),
for exec and attach the container chosen (400), a pod on no node is refused (400), the node looked up
(its own 404). Then the upgrade-aware proxy requires an upgrade (400) and dials the node's kubelet on
10250, which refuses: a 500 Status with no reason, which kubectl prints as
`Error from server: error dialing backend: dial tcp 10.128.0.7:10250: connect: connection refused`.
"""

from __future__ import annotations

from aiohttp import web

from sim.cluster import errors, messages, podlogs
from sim.cluster.store import Obj, Store

SUBRESOURCES = ("exec", "attach", "portforward")
KUBELET_PORT = 10250
"""The kubelet's streaming and API port (pkg/cluster/ports/ports.go KubeletPort)."""


def serve(request: web.Request, store: Store, subresource: str, namespace: str, name: str) -> web.Response:
    if request.method not in ("GET", "POST"):  # subresources.go upgradeableMethods
        raise errors.method_not_allowed()
    pod = store.get("pods", namespace, name)
    if pod is None:
        raise errors.not_found(errors.ResourceRef("", "pods", "Pod", name))
    if subresource != "portforward":
        podlogs.choose_container(pod, request.query.get("container", ""))
    node_name = pod["spec"].get("nodeName")
    if not node_name:
        raise errors.bad_request(messages.no_host_assigned(name))
    node = store.get("nodes", "", node_name)
    if node is None:  # NodeConnectionInfoGetter: the node's own NotFound
        raise errors.not_found(errors.ResourceRef("", "nodes", "Node", node_name))
    if "upgrade" not in request.headers.get("Connection", "").lower():
        raise errors.bad_request(messages.UPGRADE_REQUIRED)
    raise errors.ApiError(500, "", messages.kubelet_refused(internal_ip(node), KUBELET_PORT))


def internal_ip(node: Obj) -> str:
    addresses = node.get("status", {}).get("addresses") or []
    found = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), node["metadata"]["name"])
    return str(found)
