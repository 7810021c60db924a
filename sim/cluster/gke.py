"""The GKE v1 node-pool API over the pool registry, so gcloud and google-cloud-container run unmodified.

Both clients are served: gcloud sends enum names, int64 values as strings and explicit zeros; the
protobuf REST client sends enum integers and leaves zero values out. Every mutation returns an
Operation kept here, RUNNING for its kind's time in `Timings` (the world's defaults take minutes; this
class alone, as the unit tests build it, finishes at once). A new pool is PROVISIONING until its
Operation is DONE and gets no nodes before; a deleted one is STOPPING, then gone. Other changes (sizes,
autoscaling, labels, taints) apply at once and only their Operation runs on.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiohttp import web

from sim.clock import EPOCH, Clock
from sim.cluster import config, gce, messages
from sim.cluster.pools import GKE, NodePool, PoolExists, PoolNotFound, PoolRegistry, Taint, Transitions

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MASTER_VERSION = messages.GKE_VERSION
DEFAULT_MACHINE_TYPE = gce.DEFAULT_MACHINE_TYPE
DEFAULT_DISK_SIZE_GB = 100
DEFAULT_OAUTH_SCOPES = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
]
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")

TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
GKE_TAINT_EFFECTS = {kube: name for name, kube in TAINT_EFFECTS.items()}
TAINT_EFFECT_CODES = {1: "NO_SCHEDULE", 2: "PREFER_NO_SCHEDULE", 3: "NO_EXECUTE"}

# Enum fields a client may send as integers; echoed back as names, since gcloud cannot read integers.
LOCATION_POLICIES = {0: "LOCATION_POLICY_UNSPECIFIED", 1: "BALANCED", 2: "ANY"}
GPU_DRIVER_VERSIONS = {
    0: "GPU_DRIVER_VERSION_UNSPECIFIED",
    1: "INSTALLATION_DISABLED",
    2: "DEFAULT",
    3: "LATEST",
}
GPU_SHARING_STRATEGIES = {0: "GPU_SHARING_STRATEGY_UNSPECIFIED", 1: "TIME_SHARING", 2: "MPS"}

UPDATE_OPERATIONS = frozenset(
    {"UPDATE_CLUSTER", "UPGRADE_NODES", "SET_NODE_POOL_SIZE", "SET_NODE_POOL_MANAGEMENT"}
)

HTTP_STATUS_NAMES = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 409: "ALREADY_EXISTS"}


class GkeError(Exception):
    """An error the API answers with Google's JSON envelope."""

    def __init__(self, code: int, message: str, *, status: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or HTTP_STATUS_NAMES.get(code, "FAILED_PRECONDITION")


def not_found(resource: str) -> GkeError:
    return GkeError(404, f"Not found: {resource}.")


def invalid(message: str) -> GkeError:
    return GkeError(400, message)


def error_response(error: GkeError) -> web.Response:
    return web.json_response(
        {"error": {"code": error.code, "message": error.message, "status": error.status}}, status=error.code
    )


def with_errors(handler: Handler) -> Handler:
    """Routes join the lead's app, so errors are turned into Google's envelope here, not in a middleware."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except GkeError as error:
            return error_response(error)

    return handle


# -- reading what the clients send ------------------------------------------------------------


async def read_body(request: web.Request) -> JsonDict:
    text = await request.text()
    if not text.strip():
        return {}
    try:
        body = json.loads(text)
    except ValueError as error:
        raise invalid(f"Invalid JSON payload received. {error}") from None
    if not isinstance(body, dict):
        raise invalid("Invalid JSON payload received. Expected an object.")
    return body


def read_int(value: Any, field: str) -> int:
    """int32 comes as a number, int64 as a string; proto3 leaves zero out entirely."""
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        raise invalid(f"Invalid value at '{field}' (TYPE_INT64), \"{value}\"") from None


def read_enum(value: Any, codes: dict[int, str]) -> str:
    if isinstance(value, int):
        return codes.get(value, str(value))
    return str(value)


def read_taint(raw: JsonDict, index: int) -> Taint:
    effect = read_enum(raw.get("effect", 0), TAINT_EFFECT_CODES)
    if effect not in TAINT_EFFECTS:
        raise invalid(f"Invalid value at 'node_pool.config.taints[{index}].effect', \"{raw.get('effect')}\"")
    return Taint(key=str(raw.get("key", "")), value=str(raw.get("value", "")), effect=TAINT_EFFECTS[effect])


def read_taints(raw: Any) -> list[Taint]:
    return [read_taint(item, index) for index, item in enumerate(raw or [])]


@dataclass(frozen=True)
class Autoscaling:
    enabled: bool
    min_nodes: int
    max_nodes: int


def read_autoscaling(raw: JsonDict | None, field: str) -> Autoscaling:
    raw = raw or {}
    scaling = Autoscaling(
        enabled=bool(raw.get("enabled", False)),
        min_nodes=read_int(raw.get("minNodeCount"), f"{field}.min_node_count"),
        max_nodes=read_int(raw.get("maxNodeCount"), f"{field}.max_node_count"),
    )
    if scaling.enabled:
        if scaling.max_nodes < 1:
            raise invalid(
                f"Invalid value for {field}.max_node_count: {scaling.max_nodes}; it must be at least 1."
            )
        if scaling.min_nodes < 0 or scaling.min_nodes > scaling.max_nodes:
            raise invalid(
                f"Invalid value for {field}.min_node_count: {scaling.min_nodes}; it must be between 0 and "
                f"max_node_count ({scaling.max_nodes})."
            )
    return scaling


def check_pool_name(name: str) -> None:
    if not POOL_NAME.match(name):
        raise invalid(
            f'Invalid value for field "node_pool.name": "{name}". Name must start with a lowercase letter '
            "followed by up to 39 lowercase letters, numbers, or hyphens, and cannot end with a hyphen."
        )


def normalized_node_pool(sent: JsonDict) -> JsonDict:
    """A copy of the client's NodePool with integer enums turned into names, kept to echo back later."""
    pool = copy.deepcopy(sent)
    config = pool.get("config") or {}
    for taint in config.get("taints") or []:
        taint["effect"] = read_enum(taint.get("effect", 0), TAINT_EFFECT_CODES)
    for accelerator in config.get("accelerators") or []:
        driver = accelerator.get("gpuDriverInstallationConfig") or {}
        if "gpuDriverVersion" in driver:
            driver["gpuDriverVersion"] = read_enum(driver["gpuDriverVersion"], GPU_DRIVER_VERSIONS)
        sharing = accelerator.get("gpuSharingConfig") or {}
        if "gpuSharingStrategy" in sharing:
            sharing["gpuSharingStrategy"] = read_enum(sharing["gpuSharingStrategy"], GPU_SHARING_STRATEGIES)
    if "autoscaling" in pool:
        pool["autoscaling"] = normalized_autoscaling(pool["autoscaling"])
    return pool


def normalized_autoscaling(sent: JsonDict | None) -> JsonDict:
    scaling = dict(sent or {})
    if "locationPolicy" in scaling:
        scaling["locationPolicy"] = read_enum(scaling["locationPolicy"], LOCATION_POLICIES)
    return scaling


def without_zero_values(fields: JsonDict) -> JsonDict:
    """Proto3 JSON, as GKE answers it: zero, false, empty and *_UNSPECIFIED values are left out."""
    return {
        key: value
        for key, value in fields.items()
        if value not in (0, False, "", None, [], {}) and not str(value).endswith("_UNSPECIFIED")
    }


def timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, as GKE writes Operation and Cluster times."""
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- operations ---------------------------------------------------------------------------------


@dataclass
class Operation:
    name: str
    operation_type: str
    target_link: str
    self_link: str
    started: float
    done_at: float
    status_message: str = ""
    error_code: int = 0

    def running(self, now: float) -> bool:
        return now < self.done_at


class GkeApi:
    """One project, one zonal cluster, its GKE pools in the registry, and the Operations it started."""

    def __init__(
        self,
        registry: PoolRegistry,
        *,
        project: str,
        location: str,
        cluster: str,
        clock: Clock,
        node_counts: Callable[[str], int],
        timings: config.Timings | None = None,
        transitions: Transitions | None = None,
    ) -> None:
        self.registry = registry
        self.project = project
        self.location = location
        self.cluster = cluster
        self.clock = clock
        self.node_counts = node_counts
        self.timings = timings or config.instant_cloud()
        """`gke_pool_create`, `_delete`, `_update`: how long Operations run; settable at any time."""
        self.transitions = transitions or Transitions(registry, clock)
        self.operations: dict[str, Operation] = {}
        self._sequence = itertools.count(1)
        self._next_failure: tuple[int, str] | None = None

    def fail_next_operation(self, message: str, *, code: int = 8) -> None:
        """The next mutation is not applied; its Operation ends DONE with this error (code 8 means quota)."""
        self._next_failure = (code, message)

    def routes(self) -> list[web.RouteDef]:
        scope = "/v1/projects/{project}/{scope:locations|zones}/{location}"
        cluster = scope + "/clusters/{cluster:[^/:]+}"
        pool = cluster + "/nodePools/{pool:[^/:]+}"
        table: list[tuple[str, str, Handler]] = [
            ("GET", scope + "/clusters", self.list_clusters),
            ("GET", cluster, self.get_cluster),
            ("PUT", cluster, self.update_cluster),
            ("GET", cluster + "/nodePools", self.list_pools),
            ("POST", cluster + "/nodePools", self.create_pool),
            ("GET", pool, self.get_pool),
            ("DELETE", pool, self.delete_pool),
            ("PUT", pool, self.update_pool),
            ("POST", pool + "/update", self.update_pool),
            ("POST", pool + ":setAutoscaling", self.set_autoscaling),
            ("POST", pool + "/autoscaling", self.set_autoscaling),
            ("POST", pool + ":setSize", self.set_size),
            ("POST", pool + "/setSize", self.set_size),
            ("POST", pool + ":setManagement", self.set_management),
            ("POST", pool + "/setManagement", self.set_management),
            ("GET", scope + "/operations", self.list_operations),
            ("GET", scope + "/operations/{operation:[^/:]+}", self.get_operation),
        ]
        return [web.route(method, path, with_errors(handler)) for method, path, handler in table]

    # -- names and links ------------------------------------------------------------------------
    def cluster_name(self) -> str:
        return f"projects/{self.project}/zones/{self.location}/clusters/{self.cluster}"

    def link(self, request: web.Request, resource: str) -> str:
        return f"{request.scheme}://{request.host}/v1/{resource}"

    def check_location(self, request: web.Request, *, allow_any: bool = False) -> None:
        project, location = request.match_info["project"], request.match_info["location"]
        if project != self.project or not (location == self.location or (allow_any and location == "-")):
            raise not_found(f"projects/{project}/locations/{location}")

    def check_cluster(self, request: web.Request) -> None:
        self.check_location(request)
        if request.match_info["cluster"] != self.cluster:
            raise not_found(
                f"projects/{self.project}/locations/{self.location}/clusters/{request.match_info['cluster']}"
            )

    def find_pool(self, request: web.Request, name: str | None = None) -> NodePool:
        self.check_cluster(request)
        name = name or request.match_info["pool"]
        try:
            pool = self.registry.get(name)
        except PoolNotFound:
            pool = None
        if pool is None or pool.cloud != GKE:
            raise not_found(f"{self.cluster_name()}/nodePools/{name}")
        return pool

    # -- rendering --------------------------------------------------------------------------------
    def pool_json(self, request: web.Request, pool: NodePool) -> JsonDict:
        sent: JsonDict = copy.deepcopy(pool.extra.get("gke", {}))
        config: JsonDict = sent.get("config") or {}
        config |= {
            "machineType": pool.machine_type,
            "diskSizeGb": config.get("diskSizeGb") or DEFAULT_DISK_SIZE_GB,
            "diskType": config.get("diskType") or "pd-balanced",
            "imageType": config.get("imageType") or "COS_CONTAINERD",
            "oauthScopes": config.get("oauthScopes") or DEFAULT_OAUTH_SCOPES,
            "serviceAccount": config.get("serviceAccount") or "default",
            "labels": dict(pool.labels),
            "taints": [
                {"key": t.key, "value": t.value, "effect": GKE_TAINT_EFFECTS[t.effect]} for t in pool.taints
            ],
        }
        config["accelerators"] = self.accelerators_json(pool, config.get("accelerators") or [])
        autoscaling = normalized_autoscaling(sent.get("autoscaling")) if pool.autoscaling else {}
        autoscaling |= {
            "enabled": pool.autoscaling,
            "minNodeCount": pool.min_size,
            "maxNodeCount": pool.max_size,
        }
        return sent | {
            "name": pool.name,
            "config": without_zero_values(config),
            "initialNodeCount": read_int(sent.get("initialNodeCount"), "initial_node_count"),
            "autoscaling": without_zero_values(autoscaling),
            "management": sent.get("management") or {"autoUpgrade": True, "autoRepair": True},
            "upgradeSettings": sent.get("upgradeSettings") or {"maxSurge": 1, "strategy": "SURGE"},
            "locations": [pool.zone],
            "status": self.pool_status(pool),
            "version": pool.version,
            "selfLink": self.link(request, f"{self.cluster_name()}/nodePools/{pool.name}"),
            "instanceGroupUrls": [pool.group_id()],
            "podIpv4CidrSize": 24,
        }

    def pool_status(self, pool: NodePool) -> str:
        """PROVISIONING and STOPPING from the pool; RECONCILING while an update Operation on it runs."""
        if pool.status != "RUNNING":
            return pool.status
        target = f"{self.cluster_name()}/nodePools/{pool.name}"
        now = self.clock.now()
        updating = any(
            op.running(now) and op.target_link.endswith(target) and op.operation_type in UPDATE_OPERATIONS
            for op in self.operations.values()
        )
        return "RECONCILING" if updating else "RUNNING"

    @staticmethod
    def accelerators_json(pool: NodePool, sent: list[JsonDict]) -> list[JsonDict]:
        if not pool.gpus_per_node or not pool.accelerator:
            return []
        first = dict(sent[0]) if sent else {}
        return [first | {"acceleratorCount": str(pool.gpus_per_node), "acceleratorType": pool.accelerator}]

    def cluster_json(self, request: web.Request) -> JsonDict:
        gke_pools = self.registry.list(GKE)
        return {
            "name": self.cluster,
            "location": self.location,
            "zone": self.location,
            "locations": [self.location],
            "status": "RUNNING",
            "currentMasterVersion": MASTER_VERSION,
            "initialClusterVersion": MASTER_VERSION,
            "currentNodeVersion": gke_pools[0].version if gke_pools else MASTER_VERSION,
            "currentNodeCount": sum(self.node_counts(pool.name) for pool in gke_pools),
            "endpoint": request.url.host or "127.0.0.1",
            "createTime": timestamp(0.0),
            "selfLink": self.link(request, self.cluster_name()),
            "network": "default",
            "subnetwork": "default",
            "loggingService": "logging.googleapis.com/kubernetes",
            "monitoringService": "monitoring.googleapis.com/kubernetes",
            "nodePools": [self.pool_json(request, pool) for pool in gke_pools],
        }

    def operation_json(
        self, request: web.Request, operation: Operation, *, just_started: bool = False
    ) -> JsonDict:
        done = not just_started and not operation.running(self.clock.now())
        body: JsonDict = {
            "name": operation.name,
            "zone": self.location,
            "location": self.location,
            "operationType": operation.operation_type,
            "status": "DONE" if done else "RUNNING",
            "selfLink": operation.self_link,
            "targetLink": operation.target_link,
            "startTime": timestamp(operation.started),
        }
        if done:
            body["endTime"] = timestamp(operation.done_at)
        if done and operation.error_code:
            # gcloud reads only statusMessage, the Python client reads error: set both.
            body["statusMessage"] = operation.status_message
            body["error"] = {"code": operation.error_code, "message": operation.status_message}
        return body

    def start_operation(
        self,
        request: web.Request,
        operation_type: str,
        target: str,
        apply: Callable[[float], object],
    ) -> web.Response:
        """Start the change (or not, when a failure was injected) and answer with a RUNNING Operation.

        `apply` gets the Operation's running time, for the changes that take effect only when it is DONE.
        """
        now = self.clock.now()
        running = next((op for op in self.operations.values() if op.running(now)), None)
        if running is not None:
            # One change at a time per cluster: 400 FAILED_PRECONDITION, "googleapi: Error 400: Cluster is
            # running incompatible operation operation-1718024305921-fd4f65ea-….", rancher/gke-operator#509.
            raise GkeError(
                400,
                f"Cluster is running incompatible operation {running.name}.",
                status="FAILED_PRECONDITION",
            )
        seconds = self.operation_seconds(operation_type)
        name = f"operation-{int((EPOCH.timestamp() + now) * 1000)}-{next(self._sequence):08x}"
        operation = Operation(
            name=name,
            operation_type=operation_type,
            target_link=self.link(request, target),
            self_link=self.link(request, f"projects/{self.project}/zones/{self.location}/operations/{name}"),
            started=now,
            done_at=now + seconds,
        )
        failure, self._next_failure = self._next_failure, None
        if failure is None:
            try:
                apply(seconds)
            except PoolExists:
                raise GkeError(409, f"Already exists: {target}.") from None
            except PoolNotFound:
                raise not_found(target) from None
        else:
            operation.error_code, operation.status_message = failure
        self.operations[name] = operation
        logger.info("GKE %s on %s: %s", operation_type, target, name)
        return web.json_response(self.operation_json(request, operation, just_started=True))

    def operation_seconds(self, operation_type: str) -> float:
        if operation_type == "CREATE_NODE_POOL":
            return self.timings.gke_pool_create
        if operation_type == "DELETE_NODE_POOL":
            return self.timings.gke_pool_delete
        return self.timings.gke_pool_update

    # -- clusters ---------------------------------------------------------------------------------
    async def list_clusters(self, request: web.Request) -> web.Response:
        self.check_location(request, allow_any=True)
        return web.json_response({"clusters": [self.cluster_json(request)]})

    async def get_cluster(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        return web.json_response(self.cluster_json(request))

    async def update_cluster(self, request: web.Request) -> web.Response:
        """Only the node-pool autoscaling part of a ClusterUpdate has an effect; other fields are accepted."""
        self.check_cluster(request)
        update = (await read_body(request)).get("update") or {}
        pool_id = update.get("desiredNodePoolId")
        if pool_id and "desiredNodePoolAutoscaling" in update:
            pool = self.find_pool(request, pool_id)
            sent = update["desiredNodePoolAutoscaling"]
            scaling = read_autoscaling(sent, "update.desired_node_pool_autoscaling")
            return self.start_operation(
                request,
                "UPDATE_CLUSTER",
                self.cluster_name(),
                lambda _: self.apply_autoscaling(pool, sent, scaling),
            )
        return self.start_operation(request, "UPDATE_CLUSTER", self.cluster_name(), lambda _: None)

    # -- node pools -------------------------------------------------------------------------------
    async def list_pools(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        return web.json_response({"nodePools": [self.pool_json(request, p) for p in self.registry.list(GKE)]})

    async def get_pool(self, request: web.Request) -> web.Response:
        return web.json_response(self.pool_json(request, self.find_pool(request)))

    async def create_pool(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        sent = (await read_body(request)).get("nodePool")
        if not isinstance(sent, dict):
            raise invalid('Invalid value for field "node_pool": must be specified.')
        pool = self.new_pool(sent)
        target = f"{self.cluster_name()}/nodePools/{pool.name}"
        return self.start_operation(
            request, "CREATE_NODE_POOL", target, lambda seconds: self.transitions.create(pool, seconds)
        )

    def new_pool(self, sent: JsonDict) -> NodePool:
        name = str(sent.get("name", ""))
        check_pool_name(name)
        config = sent.get("config") or {}
        # Without `accelerators`, the machine type decides (g2 and a2 machines come with their GPUs).
        accelerator = (config.get("accelerators") or [{}])[0]
        accelerator_count = read_int(accelerator.get("acceleratorCount"), "accelerators[0].accelerator_count")
        refused = gce.refusal(
            str(config.get("machineType") or ""), str(accelerator.get("acceleratorType") or ""), self.location
        )
        if refused:
            raise invalid(refused)
        scaling = read_autoscaling(sent.get("autoscaling"), "node_pool.autoscaling")
        initial = read_int(sent.get("initialNodeCount"), "node_pool.initial_node_count")
        if initial < 0:
            raise invalid(
                f"Invalid value for node_pool.initial_node_count: {initial}; it must not be negative."
            )
        return NodePool(
            name=name,
            cloud=GKE,
            machine_type=config.get("machineType") or DEFAULT_MACHINE_TYPE,
            accelerator_type=str(accelerator.get("acceleratorType", "")),
            accelerator_count=accelerator_count,
            min_size=scaling.min_nodes,
            max_size=scaling.max_nodes,
            autoscaling=scaling.enabled,
            target_size=initial,
            labels={str(k): str(v) for k, v in (config.get("labels") or {}).items()},
            taints=read_taints(config.get("taints")),
            zone=self.location,
            created_at=self.clock.now(),
            extra={"gke": normalized_node_pool(sent)},
        )

    async def delete_pool(self, request: web.Request) -> web.Response:
        pool = self.find_pool(request)
        target = f"{self.cluster_name()}/nodePools/{pool.name}"
        return self.start_operation(
            request, "DELETE_NODE_POOL", target, lambda seconds: self.transitions.delete(pool.name, seconds)
        )

    async def update_pool(self, request: web.Request) -> web.Response:
        """UpdateNodePoolRequest: `taints` and `labels` come wrapped ({"taints": {"taints": [...]}})."""
        pool = self.find_pool(request)
        body = await read_body(request)
        taints = read_taints((body["taints"] or {}).get("taints")) if "taints" in body else None
        labels = (body["labels"] or {}).get("labels") if "labels" in body else None
        if labels is not None:
            labels = {str(k): str(v) for k, v in labels.items()}
        target = f"{self.cluster_name()}/nodePools/{pool.name}"
        return self.start_operation(
            request,
            "UPGRADE_NODES",
            target,
            lambda _: self.registry.update(pool.name, labels=labels, taints=taints),
        )

    async def set_autoscaling(self, request: web.Request) -> web.Response:
        pool = self.find_pool(request)
        sent = (await read_body(request)).get("autoscaling") or {}
        scaling = read_autoscaling(sent, "autoscaling")
        target = f"{self.cluster_name()}/nodePools/{pool.name}"
        return self.start_operation(
            request, "UPDATE_CLUSTER", target, lambda _: self.apply_autoscaling(pool, sent, scaling)
        )

    def apply_autoscaling(self, pool: NodePool, sent: JsonDict, scaling: Autoscaling) -> None:
        self.registry.set_autoscaling(
            pool.name, enabled=scaling.enabled, min_size=scaling.min_nodes, max_size=scaling.max_nodes
        )
        pool.extra.setdefault("gke", {})["autoscaling"] = normalized_autoscaling(sent)

    async def set_size(self, request: web.Request) -> web.Response:
        pool = self.find_pool(request)
        size = read_int((await read_body(request)).get("nodeCount"), "node_count")
        if size < 0:
            raise invalid(f"Invalid value for node_count: {size}; it must not be negative.")
        target = f"{self.cluster_name()}/nodePools/{pool.name}"
        return self.start_operation(
            request, "SET_NODE_POOL_SIZE", target, lambda _: self.registry.set_size(pool.name, size)
        )

    async def set_management(self, request: web.Request) -> web.Response:
        pool = self.find_pool(request)
        management = (await read_body(request)).get("management") or {}
        target = f"{self.cluster_name()}/nodePools/{pool.name}"

        def apply(_: float) -> None:
            pool.extra.setdefault("gke", {})["management"] = dict(management)

        return self.start_operation(request, "SET_NODE_POOL_MANAGEMENT", target, apply)

    # -- operations -------------------------------------------------------------------------------
    async def get_operation(self, request: web.Request) -> web.Response:
        self.check_location(request)
        name = request.match_info["operation"]
        operation = self.operations.get(name)
        if operation is None:
            raise not_found(f"projects/{self.project}/locations/{self.location}/operations/{name}")
        return web.json_response(self.operation_json(request, operation))

    async def list_operations(self, request: web.Request) -> web.Response:
        self.check_location(request, allow_any=True)
        return web.json_response(
            {"operations": [self.operation_json(request, op) for op in self.operations.values()]}
        )
