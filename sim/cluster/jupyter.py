"""The Jupyter Server inside a simulated notebook container, as the API server's pod proxy reaches it.

Only the two read-only endpoints an idle culler reads are served, shaped as jupyter-server/jupyter_server
v2.14.1 (the version the container's log prints, `entrypoints.jupyter_log`) answers them:
- `GET /api/status` (services/api/handlers.py APIStatusHandler): `started`, `last_activity`, `kernels`,
  `connections`, as JSON with sorted keys; it does not count as activity (`_track_activity = False`).
- `GET /api/kernels` (services/kernels/handlers.py MainKernelHandler, kernelmanager.py `kernel_model`): one
  model per kernel, `id`, `name`, `last_activity`, `execution_state`, `connections`. An authenticated API
  request counts as activity (base/handlers.py APIHandler.update_api_activity) unless it carries
  `no_track_activity`.
Times are `isoformat` with `Z` for UTC (_tz.py). The token is the one the container printed
(`entrypoints.token`), read from `?token=` (auth/identity.py IdentityProvider.get_token; its other place,
the Authorization header, never arrives through the API server, whose authentication filter deletes it:
kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go). Without it an
API handler answers 403 `{"message": "Forbidden", "reason": null}` (APIHandler.get_login_url and
write_error), a method other than GET 405 (starting kernels through the API is not simulated), and any
other path is tornado's 404.

Kernels: the server starts with none. The pod annotation `sim.gpubot.dev/jupyter-kernel` starts one
(`idle` or `busy`) and sets its `execution_state` from the moment it changes; the kernel's
`last_activity` (and the server's) is that moment, as a kernel's status message updates them
(kernelmanager.py `record_activity`). Removing the annotation shuts the kernel down.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from sim.cluster import entrypoints
from sim.cluster.store import Change, Obj, Store

KERNEL_ANNOTATION = "sim.gpubot.dev/jupyter-kernel"
KERNEL_STATES = ("idle", "busy")
KERNEL_NAME = "python3"
"""The docker-stacks images' one kernelspec (ipykernel's default name)."""
FORBIDDEN = {"message": "Forbidden", "reason": None}
METHOD_NOT_ALLOWED = {"message": "Method Not Allowed", "reason": None}
"""APIHandler.write_error for tornado's HTTPError(405), a method the handler does not define."""
NOT_FOUND_PAGE = "<html><title>404: Not Found</title><body>404: Not Found</body></html>"
"""tornado.web.RequestHandler.write_error's page for a path no handler serves."""


@dataclass(frozen=True)
class Kernel:
    state: str
    since: float
    """Simulated seconds when it last changed state: its last activity."""


class Servers:
    """The Jupyter Servers of the notebook pods: kernels from the annotation's change points."""

    def __init__(self, store: Store) -> None:
        self.store, self.clock = store, store.clock
        self._kernels: dict[str, Kernel] = {}
        self._api_activity: dict[str, float] = {}
        store.subscribe(self._on_change)

    def listening(self, pod: Obj, port: int) -> bool:
        """A Jupyter image's container, running long enough for its server to listen, on its port."""
        started = self._started(pod)
        return port == entrypoints.PORT and started is not None and self.clock.now() >= started

    def serve(self, pod: Obj, method: str, path: str, query: dict[str, str]) -> web.Response:
        """One request to the server of a pod that is `listening`."""
        if path not in ("/api/status", "/api/kernels"):
            return web.Response(status=404, text=NOT_FOUND_PAGE, content_type="text/html")
        if method != "GET":  # starting or stopping kernels through the API is not simulated
            return web.json_response(METHOD_NOT_ALLOWED, status=405)
        uid = pod["metadata"]["uid"]
        if query.get("token", "") != entrypoints.token(uid):
            return web.json_response(FORBIDDEN, status=403)
        started = self._started(pod) or 0.0
        kernel = self._kernels.get(uid)
        models = [self._kernel_model(uid, kernel)] if kernel else []
        if path == "/api/kernels":
            if "no_track_activity" not in query:
                self._api_activity[uid] = self.clock.now()
            return web.Response(text=json.dumps(models), content_type="application/json")
        sources = [started, *(k.since for k in [kernel] if k), self._api_activity.get(uid, started)]
        model = {
            "started": _isoformat(self.clock.to_datetime(started)),
            "last_activity": _isoformat(self.clock.to_datetime(max(sources))),
            "kernels": len(models),
            "connections": 0,
        }
        return web.Response(text=json.dumps(model, sort_keys=True), content_type="application/json")

    def _kernel_model(self, uid: str, kernel: Kernel) -> dict[str, Any]:
        return {
            "id": str(uuid.UUID(hashlib.sha256(f"kernel:{uid}".encode()).hexdigest()[:32])),
            "name": KERNEL_NAME,
            "last_activity": _isoformat(self.clock.to_datetime(kernel.since)),
            "execution_state": kernel.state,
            "connections": 1,
        }

    def _started(self, pod: Obj) -> float | None:
        """When its server listens: the container's start plus the start-up the log shows."""
        if pod["status"].get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
            return None
        container = pod["spec"]["containers"][0]
        if container.get("command") or container.get("args"):
            return None
        if not entrypoints.is_jupyter(str(container.get("image", ""))):
            return None
        for status in pod["status"].get("containerStatuses", []):
            if status.get("name") == container["name"]:
                started = status.get("state", {}).get("running", {}).get("startedAt")
                return self.clock.from_stamp(started) + entrypoints.STARTUP_SECONDS if started else None
        return None

    def _on_change(self, change: Change) -> None:
        if change.resource != "pods":
            return
        uid = change.obj["metadata"]["uid"]
        state = (change.obj["metadata"].get("annotations") or {}).get(KERNEL_ANNOTATION)
        if change.type == "DELETED" or state not in KERNEL_STATES:
            self._kernels.pop(uid, None)
            if change.type == "DELETED":
                self._api_activity.pop(uid, None)
            return
        kernel = self._kernels.get(uid)
        now = self.clock.now()
        if kernel is None or kernel.state != state:
            self._kernels[uid] = Kernel(state, now)


def _isoformat(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
