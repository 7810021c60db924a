"""The embedded cluster, assembled: store, API server, controllers and cloud APIs on one loopback port.

`World` is what `gpubot sim` runs and what tests start on an ephemeral port with a manual clock.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import hdrs, web

from sim.clock import Clock
from sim.cluster import (
    apiserver,
    asg,
    authentication,
    authorization,
    autoscaler,
    bootstrap,
    disruption,
    eks,
    events,
    faults,
    filters,
    gke,
    kubelet,
    kueue,
    kueuecontroller,
    lifecycle,
    logs,
    metrics,
    nodes,
    podsecurity,
    pools,
    scheduler,
)
from sim.cluster.config import Faults, Timings
from sim.cluster.store import Obj, Store

logger = logging.getLogger(__name__)

T = TypeVar("T")

PROJECT, LOCATION, CLUSTER = "demo", "local-a", "demo"
EKS_REGION = "local-1"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
WORKLOAD_NAMESPACES = {"gpubot-workloads": {podsecurity.ENFORCE_LABEL: "restricted"}}
"""What gpubot's chart makes: its workloads' own namespace, enforcing Pod Security "restricted"."""


@dataclass
class WorldConfig:
    host: str = "127.0.0.1"
    port: int = 0
    speed: float | None = None
    """Simulated seconds per real second; None is the manual clock tests drive."""
    gpu_pool: bool = True
    state_dir: Path | None = None
    timings: Timings = field(default_factory=Timings)
    extended_resource_toleration: bool = True
    api_faults: faults.ApiFaultConfig = field(default_factory=faults.ApiFaultConfig)
    """API server faults from the start; `POST /simctl/v1/faults/api` changes them at run time."""
    kueue_gpu_quota: int | None = None
    """Install a minimal Kueue v0.19.2 (sim/cluster/kueue.py) with a ClusterQueue of this many GPUs and a
    LocalQueue in the workloads' namespace; None leaves Kueue out, as on a cluster without it."""


def seed_gpu_pool(*, zone: str = LOCATION) -> pools.NodePool:
    """The GPU pool exactly as the seed tutorial's `gcloud container node-pools create` makes it."""
    return pools.NodePool(
        name="gpu-pool",
        cloud=pools.GKE,
        machine_type="n1-standard-4",
        accelerator_type="nvidia-tesla-t4",
        accelerator_count=1,
        min_size=0,
        max_size=5,
        autoscaling=True,
        target_size=0,
        labels={"app-type": "gpu-workloads"},
        taints=[pools.Taint("nvidia.com/gpu", "present", "NoSchedule")],
        zone=zone,
    )


def default_pool(*, zone: str = LOCATION) -> pools.NodePool:
    return pools.NodePool(
        name="default-pool",
        cloud=pools.GKE,
        machine_type="e2-standard-4",
        min_size=2,
        max_size=2,
        autoscaling=False,
        target_size=2,
        zone=zone,
    )


class World:
    def __init__(self, config: WorldConfig | None = None) -> None:
        self.config = config or WorldConfig()
        self.clock = Clock(speed=self.config.speed)
        self.timings = self.config.timings
        self.faults = Faults()
        self.store = Store(self.clock)
        self.registry = pools.PoolRegistry()
        self.recorder = events.Recorder(self.store)
        self.logs = logs.LogStore()
        self.api = apiserver.ApiServer(
            self.store,
            apiserver.Options(
                extended_resource_toleration=self.config.extended_resource_toleration,
                kueue=self.config.kueue_gpu_quota is not None,
            ),
            kept=self.logs,
        )
        self.api.faults.set(self.config.api_faults)
        self.node_ctl = nodes.NodeController(
            self.store, self.registry, self.recorder, self.timings, self.faults
        )
        self.scheduler = scheduler.Scheduler(self.store, self.recorder, self.timings, self.api.bind_pod)
        self.kubelets = kubelet.Kubelets(self.store, self.recorder, self.timings, self.logs)
        self.disruption = disruption.DisruptionController(self.store)
        self.kueue = kueuecontroller.Kueue(self.store) if self.config.kueue_gpu_quota is not None else None
        self.lifecycle = lifecycle.NodeLifecycle(self.store, self.timings)
        self.metrics = metrics.GpuMetrics(self.store, self.faults)
        self.autoscaler = autoscaler.Autoscaler(
            self.store, self.registry, self.node_ctl, self.recorder, self.timings, self.faults
        )
        self.transitions = pools.Transitions(self.registry, self.clock)
        self.gke = gke.GkeApi(
            self.registry,
            project=PROJECT,
            location=LOCATION,
            cluster=CLUSTER,
            clock=self.clock,
            node_counts=lambda name: len(self.node_ctl.nodes_of(name)),
            timings=self.timings,
            transitions=self.transitions,
        )
        self.eks = eks.EksApi(
            self.registry,
            cluster=CLUSTER,
            region=EKS_REGION,
            clock=self.clock,
            timings=self.timings,
            transitions=self.transitions,
        )
        self.authenticator = authentication.Authenticator(self.store, self.clock)
        self.access = authorization.AccessReviews(self.store)
        self.filters = filters.Filters(self.store, self.authenticator)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._driver: asyncio.Task[None] | None = None

    # -- building ----------------------------------------------------------------------------
    def populate(self) -> None:
        if self._restore():
            return
        for name in (*SYSTEM_NAMESPACES, *WORKLOAD_NAMESPACES):
            labels = {"kubernetes.io/metadata.name": name, **WORKLOAD_NAMESPACES.get(name, {})}
            self.store.create(
                "namespaces",
                {
                    "kind": "Namespace",
                    "apiVersion": "v1",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                },
            )
        bootstrap.create_policy(self.store)
        pool = self.registry.create(default_pool())
        self.node_ctl.add_ready_nodes(pool, pool.target_size)
        self.node_ctl.pending.clear()
        if self.config.gpu_pool:
            self.registry.create(seed_gpu_pool())
        if self.config.kueue_gpu_quota is not None:
            namespace = next(iter(WORKLOAD_NAMESPACES))
            for resource, obj in kueue.install_objects(namespace, self.config.kueue_gpu_quota):
                self.store.create(resource, obj)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=8 * 1024 * 1024, middlewares=[self.filters.middleware])
        app.add_routes(self.metrics.routes())
        app.add_routes(self.access.routes())
        app.add_routes(self.authenticator.routes())
        app.add_routes(self.api.routes())
        app.add_routes(self.api.faults.routes())
        app.add_routes(self.gke.routes())
        app.add_routes(self.eks.routes())
        app.add_routes(asg.routes(self.registry, region=EKS_REGION, clock=self.clock))
        app.add_routes(
            [
                web.get("/simctl/v1/clock", self._clock_info),
                web.post("/simctl/v1/clock/advance", self._advance),
                web.post("/simctl/v1/faults", self._set_faults),
                web.get("/simctl/v1/traffic", self._traffic),
                web.post("/simctl/v1/traffic/reset", self._reset_traffic),
            ]
        )
        app.on_response_prepare.append(self._stamp_date)
        return app

    async def _stamp_date(self, request: web.Request, response: web.StreamResponse) -> None:
        """Date is the simulated clock, as a real server's is its own: clients judge freshness by it."""
        response.headers[hdrs.DATE] = email.utils.format_datetime(self.clock.datetime(), usegmt=True)

    # -- running -----------------------------------------------------------------------------
    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.populate()
        self.autoscaler.start()
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.config.host}:{port}"
        self._driver = asyncio.create_task(self.clock.drive())
        logger.info("simulated cluster serving at %s", self.url)

    async def stop(self) -> None:
        self._save()
        self.api.faults.stop()
        self.store.close_watches()
        self.logs.close_all()
        if self._driver:
            self._driver.cancel()
        if self._runner:
            await self._runner.cleanup()

    # -- control (sim-only API, for tests and the demo) --------------------------------------
    async def _clock_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"now": self.clock.now(), "time": self.clock.datetime().isoformat(), "speed": self.clock.speed}
        )

    async def _advance(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.clock.speed is not None:
            return web.json_response(
                {"error": "the clock follows wall time; advance needs --speed 0"}, status=409
            )
        self.advance(float(body.get("seconds", 0)))
        return web.json_response({"now": self.clock.now()})

    async def _traffic(self, request: web.Request) -> web.Response:
        """API requests by client (User-Agent), verb and resource, and the watches open now."""
        return web.json_response(self.api.traffic.snapshot())

    async def _reset_traffic(self, request: web.Request) -> web.Response:
        self.api.traffic.reset()
        return web.json_response(self.api.traffic.snapshot())

    async def _set_faults(self, request: web.Request) -> web.Response:
        body = await request.json()
        if "access" in body:
            try:
                rule = self.access.set_fault(body["access"], body.get("kind"))
            except ValueError as err:
                return web.json_response({"error": str(err)}, status=400)
            return web.json_response({"access": vars(rule), "kind": body.get("kind")})
        if "pod" in body:
            try:
                self.metrics.set_fault(str(body["pod"]), body.get("kind"), after=body.get("after"))
            except (TypeError, ValueError) as err:
                return web.json_response({"error": str(err)}, status=400)
            return web.json_response({"pod": body["pod"], "kind": body.get("kind")})
        pool, kind = str(body.get("pool", "")), body.get("kind")
        self.set_fault(pool, kind)
        return web.json_response({"pool": pool, "kind": kind})

    def set_fault(self, pool: str, kind: str | None) -> None:
        """`stockout`, `quota`, `never_register`, or None to heal the pool."""
        self.faults.stockout.discard(pool)
        self.faults.quota_exceeded.discard(pool)
        self.faults.never_register.discard(pool)
        if kind == "stockout":
            self.faults.stockout.add(pool)
        elif kind == "quota":
            self.faults.quota_exceeded.add(pool)
        elif kind == "never_register":
            self.faults.never_register.add(pool)

    def advance(self, seconds: float, *, step: float = 1.0) -> None:
        """Manual clock: move in steps so controllers react between timers as they would live."""
        remaining = seconds
        while remaining > 0:
            self.clock.advance(min(step, remaining))
            remaining -= step
        self.clock.advance(0)

    # -- persistence -------------------------------------------------------------------------
    def _state_file(self) -> Path | None:
        return self.config.state_dir / "cluster.json" if self.config.state_dir else None

    def _save(self) -> None:
        path = self._state_file()
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "epoch": self.clock.epoch.isoformat(),
            "clock": self.clock.now(),
            "store": self.store.snapshot(),
            "pools": self.registry.snapshot(),
            "token_key": self.authenticator.key.hex(),
        }
        path.write_text(json.dumps(state))

    def _restore(self) -> bool:
        path = self._state_file()
        if path is None or not path.exists():
            return False
        state = json.loads(path.read_text())
        # Keep the saved epoch, so stored timestamps and the clock still agree.
        self.clock.epoch = datetime.fromisoformat(state["epoch"])
        self.clock.run_due(float(state["clock"]))
        self.store.restore(state["store"])
        self.registry.restore(state["pools"])
        if "token_key" in state:  # ServiceAccount tokens issued before the restart stay valid
            self.authenticator.key = bytes.fromhex(state["token_key"])
        for name in [p.name for p in self.registry.list()]:
            self.clock.call_soon(functools.partial(self.node_ctl.reconcile, name))
        self.transitions.resume()
        self.node_ctl.resume()
        self.kubelets.resume()
        return True

    def kubeconfig(self) -> dict[str, Any]:
        return kubeconfig(self.url)


def kubeconfig(url: str, name: str = "gpubot-sim") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": "sim"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
    }


def write_kubeconfig(path: Path, url: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(url), sort_keys=False))


class BackgroundWorld:
    """A World on its own event-loop thread, for tests and the demo, driven from ordinary code."""

    def __init__(self, config: WorldConfig | None = None) -> None:
        self.world = World(config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gpubot-sim", daemon=True)

    def __enter__(self) -> BackgroundWorld:
        self._thread.start()
        self.call(self.world.start)
        return self

    def __exit__(self, *exc: object) -> None:
        self.call(self.world.stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return self.world.url

    def call(self, coro_fn: Callable[[], Any]) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro_fn(), self._loop)
        return future.result(timeout=30)

    def run(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the sim's loop thread, where the store may be touched safely."""

        async def wrapper() -> T:
            return fn()

        result: T = self.call(wrapper)
        return result

    def advance(self, seconds: float, *, step: float = 1.0) -> None:
        self.run(lambda: self.world.advance(seconds, step=step))

    def settle(self) -> None:
        self.advance(0)

    def pods(self, namespace: str = "default") -> list[Obj]:
        return self.run(lambda: self.world.store.items("pods", namespace))

    def nodes(self) -> list[Obj]:
        return self.run(lambda: self.world.store.items("nodes"))
