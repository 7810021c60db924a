"""Core: doctor's checks of the GPU pool itself: its size range, its taint, whether its nodes advertise GPUs.

At zero nodes a pool is only what its cloud template says; with no template read, what cannot be seen is
a warning ("unknown"), never a pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.core import labels, taints
from bot.core.doctor_facts import EKS, GKE, Check, PoolFacts, Status

GPU_PLUGIN_GRACE = timedelta(minutes=15)
"""A Ready GPU node may take this long to advertise its GPUs: driver install plus device plugin."""
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"
GPU = labels.GPU_RESOURCE


def _cluster(name: str) -> str:
    return name or "CLUSTER"


def sizing_fix(pool: PoolFacts, cluster: str) -> str:
    top = max(pool.max_size or 0, 1)
    if pool.cloud == GKE:
        return (
            f"gcloud container node-pools update {pool.name} --cluster {_cluster(cluster)} "
            f"--enable-autoscaling --min-nodes 0 --max-nodes {top}"
        )
    if pool.cloud == EKS:
        return (
            f"aws eks update-nodegroup-config --cluster-name {_cluster(cluster)} --nodegroup-name "
            f"{pool.name} --scaling-config minSize=0,maxSize={top},desiredSize=0"
        )
    return f"set the node group's autoscaling range to 0..{top} (cluster-autoscaler --nodes=0:{top}:GROUP)"


def pool_sizing(pool: PoolFacts, cluster: str = "") -> Check:
    name = "pool-sizing"
    if pool.autoscaled is False:
        return Check(
            name,
            Status.FAIL,
            f"{pool.name}: the Cluster Autoscaler does not scale this pool (its status lists no such node "
            "group), so it never grows from zero",
            sizing_fix(pool, cluster),
        )
    if pool.min_size is None or pool.max_size is None:
        return Check(
            name,
            Status.WARN,
            f"{pool.name}: the autoscaler's status gives no size range (unreadable, or the old text "
            "format), so min and max are unknown",
            f"read them from the cloud: gcloud container node-pools describe {pool.name} "
            f"--format='value(autoscaling)', or aws eks describe-nodegroup --query nodegroup.scalingConfig",
        )
    low, high = pool.min_size, pool.max_size
    if low > 0:
        return Check(
            name,
            Status.FAIL,
            f"{pool.name}: min {low}, max {high}: {low} GPU node(s) stay up (and billed) even when no one "
            "uses them",
            sizing_fix(pool, cluster),
        )
    if high < 1:
        return Check(
            name,
            Status.FAIL,
            f"{pool.name}: min 0, max {high}: the autoscaler may never add a node, so GPU pods wait forever",
            sizing_fix(pool, cluster),
        )
    return Check(name, Status.PASS, f"{pool.name}: min 0, max {high}: scales from zero up to {high} node(s)")


def taint_fix(pool: PoolFacts, cluster: str) -> str:
    want = taints.EXPECTED_GPU_TAINT
    if pool.cloud == GKE:
        return (
            f"gcloud container node-pools update {pool.name} --cluster {_cluster(cluster)} "
            f"--node-taints={want}"
        )
    if pool.cloud == EKS:
        return (
            f"aws eks update-nodegroup-config --cluster-name {_cluster(cluster)} "
            f"--nodegroup-name {pool.name} --taints "
            f"'addOrUpdateTaints=[{{key={want.key},value={want.value},effect=NO_SCHEDULE}}]'"
        )
    return f"taint the pool's node template, and its nodes: kubectl taint nodes NODE {want}"


def pool_taint(pool: PoolFacts, cluster: str = "") -> Check:
    name, want = "pool-taint", taints.EXPECTED_GPU_TAINT
    if pool.nodes:
        bare = [n.name for n in pool.nodes if not any(taints.is_gpu_taint(t) for t in n.taints)]
        if bare:
            return Check(
                name,
                Status.FAIL,
                f"{pool.name}: node(s) {', '.join(bare)} lack the {want} taint, so any pod may land on "
                "(and keep up) an expensive GPU node",
                taint_fix(pool, cluster),
            )
        found = {t for n in pool.nodes for t in n.taints if taints.is_gpu_taint(t)}
        return Check(
            name,
            Status.PASS,
            f"{pool.name}: all {len(pool.nodes)} node(s) carry {taints.render(sorted(found, key=str))}, "
            "so only pods that tolerate it land there",
        )
    if pool.template is not None:
        template = pool.template
        found_gpu = [t for t in template.taints if taints.is_gpu_taint(t)]
        if found_gpu:
            return Check(
                name,
                Status.PASS,
                f"{pool.name}: no nodes now; {template.source} gives new nodes {taints.render(found_gpu)}",
            )
        return Check(
            name,
            Status.FAIL,
            f"{pool.name}: no nodes now, and {template.source} gives new nodes no {want.key} taint (taints: "
            f"{taints.render(template.taints)}), so any pod may land on a GPU node",
            taint_fix(pool, cluster),
        )
    return Check(
        name,
        Status.WARN,
        f"{pool.name}: unknown: the pool has no nodes and no cloud template was read, so whether new nodes "
        f"get the {want} taint cannot be told",
        f"check it: gcloud container node-pools describe {pool.name} --format='value(config.taints)'; "
        "or let doctor read the template: --cloud gke --cluster C --project P --location L, "
        "or --cloud eks --cluster C --region R",
    )


def gpu_advertising(pool: PoolFacts, now: datetime | None) -> Check:
    name = "gpu-advertising"
    if not pool.nodes:
        promised = pool.template.gpus if pool.template else None
        said = (
            f"; {pool.template.source} promises {promised} GPU(s) per node"
            if pool.template and promised
            else ""
        )
        where = {
            GKE: f"gcloud container node-pools describe {pool.name} --format='value(config.accelerators)'",
            EKS: f"the node group's ASG tag {TEMPLATE_TAG}resources/{GPU}",
        }
        how = where.get(pool.cloud) or f"{where[GKE]}, or {where[EKS]}"
        return Check(
            name,
            Status.WARN,
            f"{pool.name}: no nodes, so whether the device plugin advertises {GPU} cannot be checked{said}",
            f"check the template ({how}), then run doctor again while a GPU workload keeps a node up",
        )
    ready = [n for n in pool.nodes if n.ready]
    if not ready:
        return Check(
            name,
            Status.WARN,
            f"{pool.name}: {len(pool.nodes)} node(s), none Ready yet, so GPU advertising cannot be checked",
            "run doctor again once a node is Ready",
        )
    silent = [n for n in ready if n.gpus == 0]
    if not silent:
        total = sum(n.gpus for n in ready)
        return Check(
            name,
            Status.PASS,
            f"{pool.name}: {len(ready)} Ready node(s) advertise {total} allocatable {GPU}, so the device "
            "plugin runs",
        )
    names = ", ".join(n.name for n in silent)
    young = [n for n in silent if n.ready_since and now and now - n.ready_since < GPU_PLUGIN_GRACE]
    if len(young) == len(silent):
        return Check(
            name,
            Status.WARN,
            f"{pool.name}: node(s) {names}, Ready for under 15m, advertise no {GPU} yet (drivers and the "
            "device plugin may take that long)",
            "run doctor again in a few minutes",
        )
    return Check(
        name,
        Status.FAIL,
        f"{pool.name}: Ready node(s) {names} advertise no {GPU}: no NVIDIA device plugin (or GPU operator) "
        "runs there, so GPU pods never schedule",
        "GKE installs drivers and the plugin for pools created with --accelerator "
        "type=TYPE,count=1,gpu-driver-version=default; elsewhere install the NVIDIA GPU operator "
        "(helm install gpu-operator nvidia/gpu-operator -n gpu-operator --create-namespace)",
    )
