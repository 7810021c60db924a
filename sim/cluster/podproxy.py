"""`pods/proxy`: the API server's HTTP proxy to a pod's port (`…/pods/NAME[:PORT]/proxy/PATH`).

Answered in the real apiserver's order (kubernetes/kubernetes pkg/registry/core/pod/strategy.go
ResourceLocation, read at 03e0602): the id split into scheme, name and port (400 when it is none of
`name`, `name:port`, `scheme:name:port`), the pod read (404), the port defaulted to the pod's first
container port, the pod's IP checked (400 "address not allowed" before it has one), then the request
forwarded. The only servers a simulated pod runs are the Jupyter Servers of docker-stacks notebook images
(`jupyter.Servers`); anything else refuses the connection, which the proxy answers as the dial error
(500, as `streaming` answers the kubelet's).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import unquote

from aiohttp import web

from sim.cluster import errors, jupyter, messages
from sim.cluster.store import Obj, Store

SCHEMES = ("", "http", "https")
"""port_split.go validSchemes."""


def serve(
    request: web.Request, store: Store, servers: jupyter.Servers, namespace: str, pod_id: str
) -> web.Response:
    name, port = split_id(pod_id)
    pod = store.get("pods", namespace, name)
    if pod is None:
        raise errors.not_found(errors.ResourceRef("", "pods", "Pod", name))
    port = port or first_port(pod)
    ip = str(pod["status"].get("podIP") or "")
    if not global_unicast(ip):
        raise errors.bad_request(messages.ADDRESS_NOT_ALLOWED)
    if not port.isdigit() or not servers.listening(pod, int(port)):
        raise errors.ApiError(500, "", messages.dial_refused(ip, port or 80))
    path = "/" + unquote(request.path.split("/proxy", 1)[1].lstrip("/"))
    return servers.serve(pod, request.method, path, dict(request.query))


def split_id(pod_id: str) -> tuple[str, str]:
    """utilnet.SplitSchemeNamePort: the pod's name and the port asked for ("" for its first)."""
    parts = pod_id.split(":")
    scheme, name, port = {1: ("", parts[0], ""), 2: ("", *parts), 3: tuple(parts)}.get(
        len(parts), ("?", "", "")
    )
    if not name or scheme not in SCHEMES:
        raise errors.bad_request(messages.invalid_pod_request(pod_id))
    return name, port


def first_port(pod: Obj) -> str:
    for container in pod["spec"]["containers"]:
        for port in container.get("ports") or []:
            return str(port.get("containerPort", ""))
    return ""


def global_unicast(ip: str) -> bool:
    """Go's net.IP.IsGlobalUnicast: not unspecified, loopback, multicast, link-local or broadcast."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    broadcast = address == ipaddress.ip_address("255.255.255.255")
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or address.is_link_local
        or broadcast
    )
