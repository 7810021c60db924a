"""Core: what a correct scale-from-zero GPU pool is on GKE and EKS, and what is wrong with an existing one.

Most scale-from-zero incidents are setup mistakes (a pool kept at min 1, no taint, an EKS group without
the tags the Cluster Autoscaler reads at zero nodes), so the pool is derived from the GPU profile users
ask for, and every rule that makes it right is also a check on pools made by hand.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bot.core import labels, machines, models, taints


class Cloud(enum.Enum):
    GKE = "gke"
    EKS = "eks"


GPU_TAINT = taints.EXPECTED_GPU_TAINT
MAX_NODES = {Cloud.GKE: 1000, Cloud.EKS: 450}
"""GKE's nodes per pool and zone; EKS's nodes per managed nodegroup (its service quota)."""
EKS_GPU_AMI = "AL2023_x86_64_NVIDIA"
"""Amazon Linux 2023 with the NVIDIA driver; AL2 images are past end of support."""
EKS_GPU_AMIS = frozenset(
    {EKS_GPU_AMI, "AL2023_ARM_64_NVIDIA", "AL2_x86_64_GPU", "BOTTLEROCKET_x86_64_NVIDIA"}
)

# The Cluster Autoscaler's tags on an AWS Auto Scaling group (cloudprovider/aws/README.md).
CA_TAG_PREFIX = "k8s.io/cluster-autoscaler/"
CA_ENABLED_TAG = CA_TAG_PREFIX + "enabled"
"""With `k8s.io/cluster-autoscaler/<cluster>`, what `--node-group-auto-discovery=asg:tag=...` looks for."""
TEMPLATE_LABEL_TAG = CA_TAG_PREFIX + "node-template/label/"
TEMPLATE_TAINT_TAG = CA_TAG_PREFIX + "node-template/taint/"
"""Value `<taint value>:<Effect>`, e.g. `present:NoSchedule`."""
TEMPLATE_RESOURCE_TAG = CA_TAG_PREFIX + "node-template/resources/"
GPU_TAG = TEMPLATE_RESOURCE_TAG + labels.GPU_RESOURCE
UNKNOWN_GPUS = "<GPUs per node>"

GKE_POOL_NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?")
EKS_NODEGROUP_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,62}")
IAM_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/\S+")
SUBNET_ID = re.compile(r"subnet-[0-9a-zA-Z]+")


@dataclass(frozen=True)
class Refused:
    """Why a pool request cannot be carried out; nothing was changed."""

    reason: str


@dataclass(frozen=True)
class PoolRequest:
    """`gpubot pool create`, as typed: what to make the pool for, and the cloud's own inputs."""

    cloud: Cloud
    name: str
    cluster: str
    profile: models.GpuProfile
    max_size: int
    min_size: int = 0
    machine_type: str = ""
    """Empty: the usual machine for the profile's accelerator."""
    gpus_per_node: int | None = None
    """None: what the machine comes with, else the profile's `maxCount`."""
    node_role: str = ""
    subnets: tuple[str, ...] = ()
    """EKS only: the nodes' IAM role and the subnets they start in."""


@dataclass(frozen=True)
class PoolSpec:
    """A GPU pool as it should be created: adapters turn this into the cloud's request, nothing more."""

    cloud: Cloud
    name: str
    machine_type: str
    accelerator_type: str
    accelerator_count: int
    min_size: int
    max_size: int
    labels: Mapping[str, str]
    taints: tuple[taints.Taint, ...]
    node_role: str = ""
    subnets: tuple[str, ...] = ()
    ami_type: str = ""
    asg_tags: Mapping[str, str] = field(default_factory=dict)
    """EKS: the Auto Scaling group tags the Cluster Autoscaler needs to find and scale the group from zero."""


@dataclass(frozen=True)
class PoolView:
    """A pool as the cloud reports it, whoever made it."""

    cloud: Cloud
    name: str
    cluster: str
    status: str
    autoscaling: bool
    min_size: int
    max_size: int
    current_size: int | None
    """Nodes the cloud wants now (EKS: the group's desired capacity); None where the API does not say."""
    machine_type: str
    accelerator_type: str
    accelerator_count: int | None
    """GPUs per node; None when the machine type is unknown to gpubot."""
    labels: Mapping[str, str]
    taints: tuple[taints.Taint, ...]
    ami_type: str = ""
    asg_name: str = ""
    asg_tags: Mapping[str, str] | None = None
    """EKS: the Auto Scaling group's tags; None on GKE, which needs none."""
    error: str = ""
    """Why the pool could not be read in full (e.g. its Auto Scaling group's tags were refused)."""


@dataclass(frozen=True)
class Resize:
    min_size: int
    max_size: int
    desired_size: int | None
    """Set only when the current size falls outside the new bounds (EKS refuses such an update)."""


def check_sizes(cloud: Cloud, min_size: int, max_size: int) -> Refused | None:
    limit = MAX_NODES[cloud]
    if min_size < 0:
        return Refused(f"--min {min_size}: a pool cannot have fewer than 0 nodes")
    if max_size < 1:
        return Refused(f"--max {max_size}: a pool that may have no node never scales up; use at least 1")
    if max_size > limit:
        return Refused(f"--max {max_size}: {cloud.value.upper()} allows at most {limit} nodes in one pool")
    if min_size > max_size:
        return Refused(f"--min {min_size} is above --max {max_size}")
    return None


def check_name(cloud: Cloud, name: str) -> Refused | None:
    if cloud is Cloud.GKE and not GKE_POOL_NAME.fullmatch(name):
        return Refused(
            f"{name!r} is not a GKE node pool name: a lowercase letter, then up to 39 lowercase letters, "
            "digits or '-', not ending in '-'"
        )
    if cloud is Cloud.EKS and not EKS_NODEGROUP_NAME.fullmatch(name):
        return Refused(f"{name!r} is not an EKS nodegroup name: up to 63 letters, digits, '-' or '_'")
    return None


def choose_machine(request: PoolRequest, accelerator: str) -> tuple[str, int] | Refused:
    """The machine type and GPUs per node: as asked, else the usual machine for the accelerator."""
    machine = request.machine_type or machines.usual_machine(request.cloud.value, accelerator)
    if not machine:
        return Refused(f"gpubot knows no usual machine for {accelerator}; pass --machine-type")
    built_in = machines.built_in_gpus(request.cloud.value, machine)
    if built_in and built_in[0] != accelerator:
        return Refused(
            f"{machine} comes with {built_in[0]}, but profile {request.profile.name} is for {accelerator}"
        )
    gpus = request.gpus_per_node or (built_in[1] if built_in else request.profile.max_count)
    if built_in and gpus != built_in[1]:
        return Refused(f"{machine} comes with {built_in[1]} GPU(s) per node, not {gpus}")
    if gpus < request.profile.max_count:
        return Refused(
            f"profile {request.profile.name} lets one pod ask for {request.profile.max_count} GPUs, "
            f"but a node of {machine} has {gpus}: such pods would never fit"
        )
    return machine, gpus


def cloud_set_labels(cloud: Cloud, name: str, accelerator: str) -> dict[str, str]:
    """Node labels the cloud sets by itself: a profile may select them, but a pool must not set them."""
    if cloud is Cloud.GKE:
        return {labels.GKE_ACCELERATOR_LABEL: accelerator, labels.GKE_NODEPOOL_LABEL: name}
    return {labels.EKS_NODEGROUP_LABEL: name}


def pool_labels(request: PoolRequest, accelerator: str) -> dict[str, str] | Refused:
    """The profile's node selector, so its pods land here; labels the cloud sets itself are left to it."""
    selector = request.profile.node_selector_map
    cloud_set = cloud_set_labels(request.cloud, request.name, accelerator)
    for key, value in cloud_set.items():
        if selector.get(key, value) != value:
            return Refused(
                f"profile {request.profile.name} selects {key}={selector[key]}, "
                f"but {request.cloud.value.upper()} labels this pool's nodes {key}={value}"
            )
    chosen = {k: v for k, v in selector.items() if k not in cloud_set}
    if request.cloud is Cloud.EKS:
        # The autoscaler's GPU handling keys on this label; EKS does not set it (cloudprovider/aws README).
        chosen[labels.EKS_ACCELERATOR_LABEL] = accelerator
    return chosen


def node_template_tags(
    *, cluster: str, node_labels: Mapping[str, str], node_taints: tuple[taints.Taint, ...], gpus: int | None
) -> dict[str, str]:
    """The ASG tags that let the Cluster Autoscaler find a group and picture its nodes while it has none."""
    tags = {CA_ENABLED_TAG: "true", CA_TAG_PREFIX + cluster: "owned"}
    tags |= {TEMPLATE_LABEL_TAG + key: value for key, value in node_labels.items()}
    tags |= {TEMPLATE_TAINT_TAG + t.key: f"{t.value}:{t.effect}" for t in node_taints}
    if gpus:
        tags[GPU_TAG] = str(gpus)
    return tags


def check_eks_inputs(request: PoolRequest) -> Refused | None:
    if not IAM_ROLE_ARN.fullmatch(request.node_role):
        return Refused(
            f"--node-role {request.node_role!r}: EKS needs the nodes' IAM role ARN, "
            "like arn:aws:iam::123456789012:role/eks-node-role"
        )
    bad = [s for s in request.subnets if not SUBNET_ID.fullmatch(s)]
    if not request.subnets or bad:
        return Refused(
            f"--subnets {','.join(request.subnets)!r}: EKS needs subnet ids, like subnet-0a1b2c,subnet-3d4e5f"
        )
    return None


def plan_pool(request: PoolRequest) -> PoolSpec | Refused:
    """The pool for a profile, or why it cannot be made: checked in full before anything is sent."""
    profile = request.profile
    refusal = check_name(request.cloud, request.name) or check_sizes(
        request.cloud, request.min_size, request.max_size
    )
    if request.cloud is Cloud.EKS:
        refusal = refusal or check_eks_inputs(request)
    if refusal:
        return refusal
    if not profile.accelerator:
        return Refused(f"profile {profile.name} names no accelerator; add `accelerator:` to its profile")
    if not any(taints.tolerates(t, GPU_TAINT) for t in profile.tolerations):
        return Refused(
            f"profile {profile.name} does not tolerate the GPU pool's taint {GPU_TAINT}, so its pods could "
            f"never land there; add the toleration {{key: {GPU_TAINT.key}, operator: Equal, "
            f"value: {GPU_TAINT.value}, effect: {GPU_TAINT.effect}}} to the profile"
        )
    machine = choose_machine(request, profile.accelerator)
    node_labels = pool_labels(request, profile.accelerator)
    if isinstance(machine, Refused):
        return machine
    if isinstance(node_labels, Refused):
        return node_labels
    machine_type, gpus = machine
    eks = request.cloud is Cloud.EKS
    tags = node_template_tags(
        cluster=request.cluster, node_labels=node_labels, node_taints=(GPU_TAINT,), gpus=gpus
    )
    return PoolSpec(
        cloud=request.cloud,
        name=request.name,
        machine_type=machine_type,
        accelerator_type=profile.accelerator,
        accelerator_count=gpus,
        min_size=request.min_size,
        max_size=request.max_size,
        labels=node_labels,
        taints=(GPU_TAINT,),
        node_role=request.node_role,
        subnets=request.subnets,
        ami_type=EKS_GPU_AMI if eks else "",
        asg_tags=tags if eks else {},
    )


def plan_resize(pool: PoolView, *, min_size: int | None, max_size: int | None) -> Resize | Refused:
    """New bounds, keeping what is not given; the current size is pulled inside them if it falls out."""
    if min_size is None and max_size is None:
        return Refused("give --min, --max or both")
    new_min = pool.min_size if min_size is None else min_size
    new_max = pool.max_size if max_size is None else max_size
    refusal = check_sizes(pool.cloud, new_min, new_max)
    if refusal:
        return refusal
    current = pool.current_size
    if current is None or new_min <= current <= new_max:
        return Resize(min_size=new_min, max_size=new_max, desired_size=None)
    return Resize(min_size=new_min, max_size=new_max, desired_size=min(max(current, new_min), new_max))


OK_STATUSES = frozenset(
    {"RUNNING", "PROVISIONING", "RECONCILING", "STOPPING", "ACTIVE", "CREATING", "UPDATING", "DELETING"}
)
STATUS_NOTES = {
    "PROVISIONING": "being created: no node starts before it is RUNNING",
    "CREATING": "being created: no node starts before it is ACTIVE",
    "RECONCILING": "a change is being applied",
    "UPDATING": "a change is being applied",
    "STOPPING": "being deleted, with its nodes",
    "DELETING": "being deleted, with its nodes",
}


def status_text(pool: PoolView) -> str:
    """The cloud's word for the pool, and what it means while the cloud is still at work on it."""
    note = STATUS_NOTES.get(pool.status)
    return f"{pool.status} ({note})" if note else (pool.status or "unknown")


def problems(pool: PoolView) -> list[str]:
    """What keeps this pool from scaling GPU work from zero and back, each with what to change.

    `gpubot pool show` lists them all; doctor words each family (sizing, GPUs, taint, tags) as its own
    check, over the cloud's view when it has one, else over what the cluster and the autoscaler show.
    """
    found = [
        *status_problems(pool),
        *sizing_problems(autoscaling=pool.autoscaling, min_size=pool.min_size, max_size=pool.max_size),
        *gpu_problems(pool),
        *taint_problems(pool.taints),
    ]
    return found + tag_problems(pool) if pool.asg_tags is not None else found


def status_problems(pool: PoolView) -> list[str]:
    bad = pool.status and pool.status not in OK_STATUSES
    return [f"status is {pool.status}: the cloud reports the pool unhealthy; see its console"] if bad else []


def sizing_problems(*, autoscaling: bool, min_size: int | None, max_size: int | None) -> list[str]:
    """The size range's mistakes; None where the range is not known (then only autoscaling is judged)."""
    found = []
    if not autoscaling:
        found.append(
            "autoscaling is off: the Cluster Autoscaler never adds or removes nodes; "
            "turn it on with `gpubot pool set --min 0 --max N`"
        )
    if min_size is None or max_size is None:
        return found
    if min_size > 0:
        found.append(
            f"min size is {min_size}: that many GPU nodes run, and are billed, while nobody uses them; "
            "set --min 0 (a pre-warm schedule raises it only when wanted)"
        )
    if max_size < 1:
        found.append(f"max size is {max_size}: the pool can never scale up; set --max to at least 1")
    elif min_size > max_size:
        found.append(f"min size {min_size} is above max size {max_size}")
    return found


def gpu_problems(pool: PoolView) -> list[str]:
    found = []
    if pool.accelerator_count == 0 or (pool.accelerator_count is None and not pool.accelerator_type):
        found.append(
            f"no GPU accelerator on {pool.machine_type or 'its machine type'}: the nodes offer no "
            f"{labels.GPU_RESOURCE}; create the pool with `gpubot pool create --profile ...`"
        )
    if pool.cloud is Cloud.EKS and pool.ami_type and pool.ami_type not in EKS_GPU_AMIS:
        found.append(
            f"AMI type {pool.ami_type} has no NVIDIA driver: GPU nodes would never offer "
            f"{labels.GPU_RESOURCE}; use {EKS_GPU_AMI} (a new nodegroup)"
        )
    return found


def taint_problems(found: Iterable[taints.Taint]) -> list[str]:
    """The pool's (or one node's) taints: a GPU taint that keeps other pods off, or what is wrong."""
    gpu_taints = [t for t in found if t.key == GPU_TAINT.key]
    if not gpu_taints:
        return [
            f"no {GPU_TAINT.key} taint: any pod may land on a GPU node and keep it from scaling down; "
            f"taint the pool {GPU_TAINT}"
        ]
    if not any(taints.blocks(t) for t in gpu_taints):
        effects = ", ".join(sorted({t.effect for t in gpu_taints}))
        return [
            f"taint {GPU_TAINT.key} has effect {effects}: other pods still land on GPU nodes when "
            f"the rest of the cluster is full; use {GPU_TAINT}"
        ]
    return []


TAG_WHY = {
    TEMPLATE_LABEL_TAG: "does not know new nodes get this label, so pods selecting it never scale it up",
    TEMPLATE_TAINT_TAG: "does not know new nodes are tainted, and may start a GPU node for other pods",
    TEMPLATE_RESOURCE_TAG: "may not know new nodes have GPUs, so GPU pods may never scale it up",
}
"""What the Cluster Autoscaler gets wrong at zero nodes without each kind of node-template tag."""


def wanted_tags(pool: PoolView) -> dict[str, str]:
    """The ASG tags the pool lacks, or has with another value: what to set, and to what."""
    tags = pool.asg_tags or {}
    wanted = node_template_tags(
        cluster=pool.cluster, node_labels=pool.labels, node_taints=pool.taints, gpus=pool.accelerator_count
    )
    any_value = {CA_ENABLED_TAG, CA_TAG_PREFIX + pool.cluster}
    if pool.accelerator_count is None:
        wanted[GPU_TAG] = UNKNOWN_GPUS
        any_value.add(GPU_TAG)
    return {k: v for k, v in wanted.items() if k not in tags or (k not in any_value and tags[k] != v)}


def tag_problems(pool: PoolView) -> list[str]:
    """EKS: at zero nodes the Cluster Autoscaler knows a group's nodes only from these ASG tags."""
    if not pool.asg_name:
        return ["no Auto Scaling group yet: the Cluster Autoscaler has nothing to scale; wait for ACTIVE"]
    group, tags = f"ASG {pool.asg_name}", pool.asg_tags or {}
    found = []
    for key, value in wanted_tags(pool).items():
        prefix = next((p for p in TAG_WHY if key.startswith(p)), None)
        if prefix is None:
            found.append(
                f"{group} lacks the tag {key}: the Cluster Autoscaler's auto-discovery "
                f"(asg:tag={CA_ENABLED_TAG},{CA_TAG_PREFIX}{pool.cluster}) skips the group"
            )
            continue
        has = f"tags {key}={tags[key]}, not {value}" if key in tags else f"lacks the tag {key}={value}"
        found.append(f"{group} {has}: at zero nodes the Cluster Autoscaler {TAG_WHY[prefix]}")
    return found
