"""The EKS managed-nodegroup REST API over the pool registry, so boto3's EKS client and waiters run as is.

A new nodegroup is CREATING for `Timings.eks_nodegroup_create` and gets no nodes before it is ACTIVE; a
deleted one is DELETING for `eks_nodegroup_delete` (its nodes go), then describe answers
ResourceNotFoundException. A config update applies at once and stays InProgress (the nodegroup UPDATING)
for `eks_nodegroup_update`. The world's defaults take minutes; this class alone, as the unit tests build
it, finishes at once.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from aiohttp import web

from sim.clock import EPOCH, Clock
from sim.cluster import config, messages, pools
from sim.cluster.pools import EKS, NodePool, PoolExists, PoolNotFound, PoolRegistry, Taint, Transitions

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ACCOUNT_ID = "123456789012"
KUBERNETES_VERSION = messages.EKS_VERSION
RELEASE_VERSION = messages.EKS_RELEASE_VERSION
TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
EKS_TAINT_EFFECTS = {kube: name for name, kube in TAINT_EFFECTS.items()}
DEFAULT_SCALING = {"minSize": 1, "maxSize": 2, "desiredSize": 2}
"""What EKS gives a nodegroup created without a scalingConfig."""

INSTANCE_FAMILIES = frozenset(
    {"t3", "t3a", "t4g", "m5", "m5a", "m6i", "m6a", "m6g", "m7i", "m7g", "c5", "c5a", "c6i", "c6a", "c6g"}
    | {"c7i", "c7g", "r5", "r6i", "r7i", "g4dn", "g5", "g6", "g6e", "p3", "p4d", "p5", "inf2", "trn1"}
)
"""The EC2 families the sim knows (aws.amazon.com/ec2/instance-types); sizes as INSTANCE_SIZE reads them."""
INSTANCE_SIZE = re.compile(r"nano|micro|small|medium|large|metal|[0-9]*xlarge")


def known_instance_type(name: str) -> bool:
    family, _, size = name.partition(".")
    return family in INSTANCE_FAMILIES and bool(INSTANCE_SIZE.fullmatch(size))


def invalid_instance_issue(name: str, instance_type: str) -> JsonDict:
    """How EKS reports an instance type it cannot launch: CREATE_FAILED with this health issue
    (`Ec2LaunchTemplateInvalidConfiguration`, "The specified instance type c6i.xlarge is not valid",
    eksctl-io/eksctl#4544)."""
    return {
        "code": "Ec2LaunchTemplateInvalidConfiguration",
        "message": f"The specified instance type {instance_type} is not valid",
        "resourceIds": [f"eks-{name}-asg"],
    }


NOT_FOUND, IN_USE, INVALID = (
    "ResourceNotFoundException",
    "ResourceInUseException",
    "InvalidParameterException",
)
HTTP_STATUS = {NOT_FOUND: 404, IN_USE: 409, INVALID: 400}


class EksError(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


def error_response(error: EksError) -> web.Response:
    """botocore finds the error code in the header or in `__type`; both are sent, as AWS does."""
    return web.json_response(
        {"__type": error.error_type, "message": error.message},
        status=HTTP_STATUS[error.error_type],
        headers={"x-amzn-ErrorType": error.error_type},
    )


def with_errors(handler: Handler) -> Handler:
    """Routes join the lead's app, so errors are turned into AWS's envelope here, not in a middleware."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except EksError as error:
            return error_response(error)

    return handle


async def read_body(request: web.Request) -> JsonDict:
    text = await request.text()
    try:
        body = json.loads(text) if text.strip() else {}
    except ValueError:
        raise EksError(INVALID, "Request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise EksError(INVALID, "Request body must be a JSON object.")
    return body


def epoch_seconds(seconds: float) -> float:
    return (EPOCH + timedelta(seconds=seconds)).timestamp()


# -- validation -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scaling:
    min_size: int
    max_size: int
    desired_size: int


def check_scaling(scaling: Scaling) -> Scaling:
    if scaling.max_size < 1:
        raise EksError(INVALID, f"Maximum capacity {scaling.max_size} must be greater than or equal to 1")
    if scaling.min_size < 0:
        raise EksError(INVALID, f"Minimum capacity {scaling.min_size} can't be negative")
    if scaling.min_size > scaling.max_size:
        raise EksError(
            INVALID,
            f"Minimum capacity {scaling.min_size} can't be greater than maximum capacity {scaling.max_size}",
        )
    if not scaling.min_size <= scaling.desired_size <= scaling.max_size:
        raise EksError(
            INVALID,
            f"Desired capacity {scaling.desired_size} must be between minimum capacity {scaling.min_size} "
            f"and maximum capacity {scaling.max_size}",
        )
    return scaling


def read_scaling(sent: JsonDict, current: Scaling) -> Scaling:
    try:
        scaling = Scaling(
            min_size=int(sent.get("minSize", current.min_size)),
            max_size=int(sent.get("maxSize", current.max_size)),
            desired_size=int(sent.get("desiredSize", current.desired_size)),
        )
    except (TypeError, ValueError):
        raise EksError(INVALID, f"Invalid scalingConfig: {sent}") from None
    return check_scaling(scaling)


def read_taint(raw: JsonDict) -> Taint:
    effect = raw.get("effect")
    if effect not in TAINT_EFFECTS:
        raise EksError(
            INVALID, f"Invalid taint effect {effect!r}; valid values are {', '.join(TAINT_EFFECTS)}"
        )
    return Taint(key=str(raw.get("key", "")), value=str(raw.get("value", "")), effect=TAINT_EFFECTS[effect])


def taint_json(taint: Taint) -> JsonDict:
    return {"key": taint.key, "value": taint.value, "effect": EKS_TAINT_EFFECTS[taint.effect]}


def merged_taints(current: list[Taint], add: list[Taint], remove: Iterable[JsonDict]) -> list[Taint]:
    """A taint is known by key and effect; a removal without an effect removes every effect of that key."""
    removed = [(r.get("key"), TAINT_EFFECTS.get(r.get("effect", ""))) for r in remove]
    added = {(t.key, t.effect) for t in add}
    kept = [
        t
        for t in current
        if (t.key, t.effect) not in added
        and not any(t.key == k and e in (None, t.effect) for k, e in removed)
    ]
    return kept + add


def default_asg_tags(cluster: str, nodegroup: str) -> dict[str, str]:
    """The tags EKS puts on a managed nodegroup's ASG, which the autoscaler's auto-discovery looks for."""
    return {
        "eks:cluster-name": cluster,
        "eks:nodegroup-name": nodegroup,
        "k8s.io/cluster-autoscaler/enabled": "true",
        f"k8s.io/cluster-autoscaler/{cluster}": "owned",
    }


def set_asg_tags(registry: PoolRegistry, pool_name: str, tags: Mapping[str, str]) -> dict[str, str]:
    """Create or overwrite tags on the pool's ASG (node-template labels, taints, GPUs) and tell listeners."""
    pool = registry.get(pool_name)
    asg_tags: dict[str, str] = pool.extra.setdefault("asgTags", {})
    asg_tags.update(tags)
    registry.update(pool_name)
    return dict(asg_tags)


def delete_asg_tags(registry: PoolRegistry, pool_name: str, keys: Iterable[str]) -> dict[str, str]:
    pool = registry.get(pool_name)
    asg_tags: dict[str, str] = pool.extra.setdefault("asgTags", {})
    for key in keys:
        asg_tags.pop(key, None)
    registry.update(pool_name)
    return dict(asg_tags)


# -- updates ----------------------------------------------------------------------------------------


@dataclass
class Update:
    id: str
    nodegroup: str
    created: float
    done_at: float
    params: list[JsonDict] = field(default_factory=list)


def update_params(body: JsonDict) -> list[JsonDict]:
    """The change as EKS reports it: one param per size, label and taint change, values as strings."""
    params = [
        {"type": kind, "value": str(body["scalingConfig"][key])}
        for kind, key in (("MinSize", "minSize"), ("MaxSize", "maxSize"), ("DesiredSize", "desiredSize"))
        if key in (body.get("scalingConfig") or {})
    ]
    changes = (
        ("LabelsToAdd", (body.get("labels") or {}).get("addOrUpdateLabels")),
        ("LabelsToRemove", (body.get("labels") or {}).get("removeLabels")),
        ("TaintsToAdd", (body.get("taints") or {}).get("addOrUpdateTaints")),
        ("TaintsToRemove", (body.get("taints") or {}).get("removeTaints")),
    )
    return params + [{"type": kind, "value": json.dumps(value)} for kind, value in changes if value]


class EksApi:
    """One EKS cluster, its managed nodegroups (the EKS pools in the registry) and their config updates."""

    def __init__(
        self,
        registry: PoolRegistry,
        *,
        cluster: str,
        region: str,
        clock: Clock,
        timings: config.Timings | None = None,
        transitions: Transitions | None = None,
    ) -> None:
        self.registry = registry
        self.cluster = cluster
        self.region = region
        self.clock = clock
        self.timings = timings or config.instant_cloud()
        """`eks_nodegroup_create`, `_update`, `_delete`: how long each takes; settable at any time."""
        self.transitions = transitions or Transitions(registry, clock)
        self.updates: dict[str, Update] = {}

    def routes(self) -> list[web.RouteDef]:
        cluster = "/clusters/{cluster}"
        nodegroup = cluster + "/node-groups/{nodegroup}"
        table: list[tuple[str, str, Handler]] = [
            ("GET", cluster, self.describe_cluster),
            ("GET", cluster + "/node-groups", self.list_nodegroups),
            ("POST", cluster + "/node-groups", self.create_nodegroup),
            ("GET", nodegroup, self.describe_nodegroup),
            ("DELETE", nodegroup, self.delete_nodegroup),
            ("POST", nodegroup + "/update-config", self.update_nodegroup_config),
            ("GET", cluster + "/updates", self.list_updates),
            ("GET", cluster + "/updates/{update}", self.describe_update),
        ]
        return [web.route(method, path, with_errors(handler)) for method, path, handler in table]

    # -- lookups and rendering ---------------------------------------------------------------------
    def check_cluster(self, request: web.Request) -> None:
        if request.match_info["cluster"] != self.cluster:
            raise EksError(NOT_FOUND, f"No cluster found for name: {request.match_info['cluster']}.")

    def find_nodegroup(self, request: web.Request, name: str | None = None) -> NodePool:
        self.check_cluster(request)
        name = name or request.match_info["nodegroup"]
        try:
            pool = self.registry.get(name)
        except PoolNotFound:
            pool = None
        if pool is None or pool.cloud != EKS:
            raise EksError(NOT_FOUND, f"No node group found for name: {name}.")
        return pool

    def arn(self, kind: str, name: str) -> str:
        return f"arn:aws:eks:{self.region}:{ACCOUNT_ID}:{kind}/{name}"

    def status(self, pool: NodePool) -> str:
        if pool.status == pools.STOPPING:
            return "DELETING"
        if pool.status == pools.PROVISIONING:
            return "CREATING"
        if pool.status == pools.ERROR:
            return "CREATE_FAILED"
        if any(
            u.nodegroup == pool.name and self.update_status(u) == "InProgress" for u in self.updates.values()
        ):
            return "UPDATING"
        return "ACTIVE"

    def update_status(self, update: Update) -> str:
        return "InProgress" if self.clock.now() < update.done_at else "Successful"

    def nodegroup_json(self, pool: NodePool) -> JsonDict:
        sent: JsonDict = pool.extra.get("eks", {})
        gpu = pools.machine(pool.machine_type).gpus > 0
        return sent | {
            "nodegroupName": pool.name,
            "nodegroupArn": pool.extra.get("arn") or self.arn("nodegroup", f"{self.cluster}/{pool.name}/sim"),
            "clusterName": self.cluster,
            "version": pool.version,
            "releaseVersion": sent.get("releaseVersion") or RELEASE_VERSION,
            "createdAt": epoch_seconds(pool.created_at),
            "modifiedAt": epoch_seconds(pool.extra.get("modifiedAt", pool.created_at)),
            "status": self.status(pool),
            "capacityType": sent.get("capacityType") or "ON_DEMAND",
            "scalingConfig": {
                "minSize": pool.min_size,
                "maxSize": pool.max_size,
                "desiredSize": pool.target_size,
            },
            "instanceTypes": sent.get("instanceTypes") or [pool.machine_type],
            "subnets": sent.get("subnets") or [],
            "amiType": sent.get("amiType") or ("AL2_x86_64_GPU" if gpu else "AL2_x86_64"),
            "nodeRole": sent.get("nodeRole") or f"arn:aws:iam::{ACCOUNT_ID}:role/eks-node-role",
            "labels": dict(pool.labels),
            "taints": [taint_json(t) for t in pool.taints],
            "resources": {"autoScalingGroups": [{"name": pool.group_id()}]},
            "diskSize": sent.get("diskSize") or 20,
            "health": {"issues": list(pool.extra.get("healthIssues", []))},
            "updateConfig": sent.get("updateConfig") or {"maxUnavailable": 1},
            "tags": sent.get("tags") or {},
        }

    def update_json(self, update: Update) -> JsonDict:
        return {
            "id": update.id,
            "status": self.update_status(update),
            "type": "ConfigUpdate",
            "params": update.params,
            "createdAt": epoch_seconds(update.created),
            "errors": [],
        }

    # -- cluster --------------------------------------------------------------------------------------
    async def describe_cluster(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        cluster = {
            "name": self.cluster,
            "arn": self.arn("cluster", self.cluster),
            "createdAt": epoch_seconds(0.0),
            "version": KUBERNETES_VERSION,
            "endpoint": f"{request.scheme}://{request.host}",
            "roleArn": f"arn:aws:iam::{ACCOUNT_ID}:role/eks-cluster-role",
            "resourcesVpcConfig": {
                "subnetIds": [],
                "endpointPublicAccess": True,
                "endpointPrivateAccess": False,
            },
            "status": "ACTIVE",
            "certificateAuthority": {"data": ""},
            "platformVersion": "eks.1",
            "tags": {},
        }
        return web.json_response({"cluster": cluster})

    # -- nodegroups -----------------------------------------------------------------------------------
    async def list_nodegroups(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        names = [p.name for p in self.registry.list(EKS)]
        start = int(request.query.get("nextToken") or 0)
        size = int(request.query.get("maxResults") or 100)
        body: JsonDict = {"nodegroups": names[start : start + size]}
        if start + size < len(names):
            body["nextToken"] = str(start + size)
        return web.json_response(body)

    async def create_nodegroup(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        body = await read_body(request)
        name = str(body.get("nodegroupName") or "")
        for required in ("nodegroupName", "subnets", "nodeRole"):
            if not body.get(required):
                raise EksError(INVALID, f"{required} is required")
        scaling = read_scaling(body.get("scalingConfig") or DEFAULT_SCALING, Scaling(0, 0, 0))
        sent = {
            k: v
            for k, v in body.items()
            if k not in ("clientRequestToken", "scalingConfig", "labels", "taints")
        }
        pool = NodePool(
            name=name,
            cloud=EKS,
            machine_type=(body.get("instanceTypes") or ["t3.medium"])[0],
            min_size=scaling.min_size,
            max_size=scaling.max_size,
            autoscaling=True,
            target_size=scaling.desired_size,
            labels={str(k): str(v) for k, v in (body.get("labels") or {}).items()},
            taints=[read_taint(t) for t in body.get("taints") or []],
            zone=f"{self.region}a",
            created_at=self.clock.now(),
            version=str(body.get("version") or KUBERNETES_VERSION),
            extra={
                "eks": sent,
                "arn": self.arn("nodegroup", f"{self.cluster}/{name}/{uuid.uuid4()}"),
                "asgTags": default_asg_tags(self.cluster, name),
            },
        )
        if not known_instance_type(pool.machine_type):
            pool.extra["healthIssues"] = [invalid_instance_issue(name, pool.machine_type)]
        try:
            self.transitions.create(
                pool, self.timings.eks_nodegroup_create, fails=bool(pool.extra.get("healthIssues"))
            )
        except PoolExists:
            raise EksError(
                IN_USE, f"NodeGroup already exists with name {name} and cluster name {self.cluster}"
            ) from None
        logger.info("EKS nodegroup %s created in %s", name, self.cluster)
        return web.json_response({"nodegroup": self.nodegroup_json(pool)})

    async def describe_nodegroup(self, request: web.Request) -> web.Response:
        return web.json_response({"nodegroup": self.nodegroup_json(self.find_nodegroup(request))})

    async def delete_nodegroup(self, request: web.Request) -> web.Response:
        """Answers DELETING; the pool leaves the registry after `eks_nodegroup_delete`."""
        pool = self.find_nodegroup(request)
        if pool.status == pools.STOPPING:
            return web.json_response({"nodegroup": self.nodegroup_json(pool)})
        seconds = self.timings.eks_nodegroup_delete
        if seconds <= 0:  # the answer still shows DELETING, as EKS's does
            body = {"nodegroup": self.nodegroup_json(pool) | {"status": "DELETING"}}
            self.transitions.delete(pool.name, 0)
            return web.json_response(body)
        self.transitions.delete(pool.name, seconds)
        logger.info("EKS nodegroup %s deleting from %s", pool.name, self.cluster)
        return web.json_response({"nodegroup": self.nodegroup_json(pool)})

    async def update_nodegroup_config(self, request: web.Request) -> web.Response:
        pool = self.find_nodegroup(request)
        if self.status(pool) != "ACTIVE":
            raise EksError(IN_USE, "Nodegroup cannot be updated as it is currently not in Active State")
        body = await read_body(request)
        params = update_params(body)
        if not params:
            raise EksError(INVALID, "No changes needed")
        current = Scaling(pool.min_size, pool.max_size, pool.target_size)
        scaling = read_scaling(body.get("scalingConfig") or {}, current)
        labels = self.updated_labels(pool, body.get("labels") or {})
        taint_changes = body.get("taints") or {}
        added = [read_taint(t) for t in taint_changes.get("addOrUpdateTaints") or []]
        removed = taint_changes.get("removeTaints") or []
        for taint in removed:  # a removal may leave the effect out, but a given one must be valid
            read_taint({"effect": "NO_SCHEDULE"} | taint)

        self.registry.set_autoscaling(
            pool.name, enabled=True, min_size=scaling.min_size, max_size=scaling.max_size
        )
        self.registry.set_size(pool.name, scaling.desired_size)
        self.registry.update(pool.name, labels=labels, taints=merged_taints(pool.taints, added, removed))
        pool.extra["modifiedAt"] = self.clock.now()
        now = self.clock.now()
        update = Update(
            id=str(uuid.uuid4()),
            nodegroup=pool.name,
            created=now,
            done_at=now + self.timings.eks_nodegroup_update,
            params=params,
        )
        self.updates[update.id] = update
        return web.json_response({"update": self.update_json(update)})

    @staticmethod
    def updated_labels(pool: NodePool, changes: JsonDict) -> dict[str, str]:
        add = {str(k): str(v) for k, v in (changes.get("addOrUpdateLabels") or {}).items()}
        remove = set(changes.get("removeLabels") or [])
        if both := sorted(remove & add.keys()):
            raise EksError(INVALID, f"The following labels are both added and removed: {', '.join(both)}")
        return {k: v for k, v in pool.labels.items() if k not in remove} | add

    # -- updates ----------------------------------------------------------------------------------------
    async def list_updates(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        nodegroup = request.query.get("nodegroupName")
        if nodegroup:
            self.find_nodegroup(request, nodegroup)
        ids = [u.id for u in self.updates.values() if u.nodegroup == nodegroup]
        return web.json_response({"updateIds": ids})

    async def describe_update(self, request: web.Request) -> web.Response:
        self.check_cluster(request)
        update = self.updates.get(request.match_info["update"])
        nodegroup = request.query.get("nodegroupName")
        if update is None or (nodegroup and update.nodegroup != nodegroup):
            raise EksError(NOT_FOUND, f"No update found for ID: {request.match_info['update']}.")
        return web.json_response({"update": self.update_json(update)})
