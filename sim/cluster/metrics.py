"""DCGM-style GPU utilisation, served through a Prometheus-compatible query API (`/api/v1/query[_range]`).

Nothing is stored: every query recomputes the samples a DCGM exporter scraped every 15 simulated
seconds would have left, from the store and the clock. A running pod holding GPUs on a GPU node has
one series per GPU, from its container's start: 97 % while its command keeps the GPU busy, 0 % while
it only sleeps (see `containers.behaviour`). The pod annotation `sim.gpubot.dev/gpu-util: "<percent>"`
overrides that from the moment it is set, and pod faults make a series missing or stale.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from sim.cluster import containers, promql
from sim.cluster.config import Faults
from sim.cluster.store import Change, Obj, Store

logger = logging.getLogger(__name__)

UTIL_ANNOTATION = "sim.gpubot.dev/gpu-util"
SCRAPE_INTERVAL = 15.0
"""The scrape interval of the dcgm-exporter ServiceMonitor the GPU operator installs."""
BUSY_PERCENT = 97.0
GPU = "nvidia.com/gpu"
PERCENT_PER_UNIT = {"DCGM_FI_DEV_GPU_UTIL": 1.0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 100.0}
"""GPU_UTIL is a percentage, GR_ENGINE_ACTIVE a ratio of 0-1."""
MODEL_NAMES = {
    "nvidia-tesla-t4": "Tesla T4",
    "nvidia-l4": "NVIDIA L4",
    "nvidia-tesla-a100": "NVIDIA A100-SXM4-40GB",
    "nvidia-a100-80gb": "NVIDIA A100-SXM4-80GB",
    "nvidia-h100-80gb": "NVIDIA H100 80GB HBM3",
    "nvidia-a10g": "NVIDIA A10G",
    "nvidia-tesla-v100": "Tesla V100-SXM2-16GB",
}
ACCELERATOR_LABELS = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")
MISSING, STALE = "metrics_missing", "metrics_stale"

Timeline = tuple[tuple[float, float | None], ...]
"""(since, percent) change points of the annotation, in simulated seconds; None follows the command."""


class GpuMetrics:
    def __init__(self, store: Store, faults: Faults) -> None:
        self.store, self.faults, self.clock = store, faults, store.clock
        self._timelines: dict[str, Timeline] = {}
        store.subscribe(self._on_change)

    # -- faults ------------------------------------------------------------------------------
    def set_fault(self, pod: str, kind: str | None, *, after: float | None = None) -> None:
        """`metrics_missing`, `metrics_stale` (no samples after `after`, default now) or None to heal."""
        namespace, _, name = pod.partition("/")
        if not namespace or not name:
            raise ValueError(f'"pod" must be "namespace/name", not {pod!r}')
        if kind not in (MISSING, STALE, None):
            raise ValueError(f"unknown pod fault {kind!r}; use {MISSING!r}, {STALE!r} or null")
        self.faults.metrics_missing.discard(pod)
        self.faults.metrics_stale_after.pop(pod, None)
        if kind == MISSING:
            self.faults.metrics_missing.add(pod)
        elif kind == STALE:
            self.faults.metrics_stale_after[pod] = self.clock.now() if after is None else float(after)

    # -- series ------------------------------------------------------------------------------
    def series(self) -> list[promql.Series]:
        """Every series Prometheus holds now, for each metric the exporter serves."""
        nodes = {n["metadata"]["name"]: n for n in self.store.iter_raw("nodes") if _gpu_count(n) > 0}
        by_node: dict[str, list[Obj]] = {}
        for pod in self.store.iter_raw("pods"):
            node = pod["spec"].get("nodeName")
            if node in nodes and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                by_node.setdefault(node, []).append(pod)
        out: list[promql.Series] = []
        for node_name, pods in by_node.items():
            next_index = 0
            for pod in sorted(pods, key=_creation_order):
                for container in pod["spec"]["containers"]:
                    count = _gpus_of(container)
                    for index in range(next_index, next_index + count):
                        out += self._container_series(pod, container, nodes[node_name], index)
                    next_index += count
        return out

    def _container_series(self, pod: Obj, container: Obj, node: Obj, index: int) -> list[promql.Series]:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        started = _running_since(pod, container["name"])
        if pod["status"].get("phase") != "Running" or started is None or key in self.faults.metrics_missing:
            return []
        epoch = self.clock.epoch.timestamp()
        first = math.ceil(self.clock.from_stamp(started) / SCRAPE_INTERVAL) * SCRAPE_INTERVAL
        last = self.clock.now()
        stale_from = None
        if key in self.faults.metrics_stale_after:
            cutoff = self.faults.metrics_stale_after[key]
            last = min(last, cutoff)
            stale_from = epoch + max(first, (math.floor(cutoff / SCRAPE_INTERVAL) + 1) * SCRAPE_INTERVAL)
        labels = _labels(pod, container, node, index)
        percent_at = self._percent_function(pod, container)
        return [
            promql.Series(
                {"__name__": metric} | labels,
                first=epoch + first,
                last=epoch + last,
                interval=SCRAPE_INTERVAL,
                value_at=_scaled(percent_at, epoch, scale),
                stale_from=stale_from,
            )
            for metric, scale in PERCENT_PER_UNIT.items()
        ]

    def _percent_function(self, pod: Obj, container: Obj) -> Callable[[float], float]:
        base = BUSY_PERCENT if containers.behaviour(container).uses_gpu else 0.0
        # Restored from saved state, the change points are gone: the current annotation holds throughout.
        timeline = self._timelines.get(pod["metadata"]["uid"]) or ((-math.inf, _override(pod)),)

        def percent_at(seconds: float) -> float:
            percent = base
            for since, override in timeline:
                if since <= seconds:
                    percent = base if override is None else override
            return percent

        return percent_at

    def _on_change(self, change: Change) -> None:
        if change.resource != "pods":
            return
        uid = change.obj["metadata"]["uid"]
        if change.type == "DELETED":
            self._timelines.pop(uid, None)
            return
        timeline = self._timelines.get(uid, ())
        value = _override(change.obj)
        if (timeline[-1][1] if timeline else None) != value:
            self._timelines[uid] = (*timeline, (self.clock.now(), value))

    # -- HTTP --------------------------------------------------------------------------------
    def routes(self) -> list[web.RouteDef]:
        return [
            web.route(method, path, handler)
            for method in ("GET", "POST")
            for path, handler in (("/api/v1/query", self._query), ("/api/v1/query_range", self._query_range))
        ]

    async def _query(self, request: web.Request) -> web.Response:
        params = await _params(request)
        try:
            query = _param(params, "query", promql.parse)
            now = self.clock.epoch.timestamp() + self.clock.now()
            at = _param(params, "time", promql.parse_time) if "time" in params else now
            data = promql.instant(query, self.series(), at)
        except promql.QueryError as err:
            return _bad_data(str(err))
        return web.json_response({"status": "success", "data": data})

    async def _query_range(self, request: web.Request) -> web.Response:
        params = await _params(request)
        try:
            query = _param(params, "query", promql.parse)
            start = _param(params, "start", promql.parse_time)
            end = _param(params, "end", promql.parse_time)
            if end < start:
                raise promql.QueryError(
                    'invalid parameter "end": end timestamp must not be before start time'
                )
            step = _param(params, "step", promql.parse_step)
            data = promql.ranged(query, self.series(), start, end, step)
        except promql.QueryError as err:
            return _bad_data(str(err))
        return web.json_response({"status": "success", "data": data})


async def _params(request: web.Request) -> dict[str, str]:
    """Prometheus reads the URL and, for POST, the form body alike."""
    params = dict(request.query)
    if request.method == "POST":
        params |= {k: str(v) for k, v in (await request.post()).items()}
    return params


def _param(params: Mapping[str, str], name: str, parse: Callable[[str], Any]) -> Any:
    try:
        return parse(params.get(name, ""))
    except promql.QueryError as err:
        raise promql.QueryError(f'invalid parameter "{name}": {err}') from err


def _bad_data(message: str) -> web.Response:
    return web.json_response({"status": "error", "errorType": "bad_data", "error": message}, status=400)


def _scaled(percent_at: Callable[[float], float], epoch: float, scale: float) -> Callable[[float], float]:
    return lambda unix: percent_at(unix - epoch) / scale


def _labels(pod: Obj, container: Obj, node: Obj, index: int) -> dict[str, str]:
    """The labels dcgm-exporter sets with pod attribution on, plus the scrape target's job and instance."""
    node_meta = node["metadata"]
    node_labels = node_meta.get("labels") or {}
    accelerator = next((node_labels[k] for k in ACCELERATOR_LABELS if k in node_labels), "")
    addresses = node.get("status", {}).get("addresses", [])
    host_ip = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), "127.0.0.1")
    return {
        "gpu": str(index),
        "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, node_meta['uid'] + f'/{index}')}",
        "pci_bus_id": f"00000000:00:{4 + index:02X}.0",
        "device": f"nvidia{index}",
        "modelName": MODEL_NAMES.get(accelerator, accelerator or "NVIDIA GPU"),
        "Hostname": node_meta["name"],
        "container": container["name"],
        "namespace": pod["metadata"]["namespace"],
        "pod": pod["metadata"]["name"],
        "instance": f"{host_ip}:9400",
        "job": "nvidia-dcgm-exporter",
    }


def _override(pod: Obj) -> float | None:
    """The annotation's percentage; absent or not a number 0-100 means the command decides."""
    text = (pod["metadata"].get("annotations") or {}).get(UTIL_ANNOTATION)
    try:
        percent = float(text) if text is not None else None
    except ValueError:
        return None
    return percent if percent is not None and 0.0 <= percent <= 100.0 else None


def _creation_order(pod: Obj) -> tuple[str, str]:
    return pod["metadata"]["creationTimestamp"], pod["metadata"]["name"]


def _gpu_count(node: Obj) -> int:
    return int(node.get("status", {}).get("allocatable", {}).get(GPU, "0") or 0)


def _gpus_of(container: Obj) -> int:
    resources = container.get("resources") or {}
    amount = (resources.get("limits") or {}).get(GPU) or (resources.get("requests") or {}).get(GPU) or 0
    return int(amount)


def _running_since(pod: Obj, container: str) -> str | None:
    for status in pod["status"].get("containerStatuses", []):
        if status.get("name") == container:
            started = status.get("state", {}).get("running", {}).get("startedAt")
            return str(started) if started else None
    return None
