"""Core: doctor's checks of the GPU pool itself: its size range, its taint, whether its nodes advertise GPUs.

At zero nodes a pool is only what its cloud template says; with no template read, what cannot be seen is
a warning ("unknown"), never a pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.core import doctor_facts, labels, pools, taints
from bot.core.doctor_facts import EKS, GKE, Check, PoolFacts, Status

GPU_PLUGIN_GRACE = timedelta(minutes=15)
"""A Ready GPU node may take this long to advertise its GPUs: driver install plus device plugin."""
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
    """`pools.sizing_problems` over the range the autoscaler itself uses (its status), which is the one
    that scales; the cloud's configured range is `gpubot pool show`'s."""
    name, low, high = "pool-sizing", pool.min_size, pool.max_size
    found = pools.sizing_problems(autoscaling=pool.autoscaled is not False, min_size=low, max_size=high)
    if found:
        return Check(name, Status.FAIL, f"{pool.name}: " + "; ".join(found), sizing_fix(pool, cluster))
    if low is None or high is None:
        return Check(
            name,
            Status.WARN,
            f"{pool.name}: the autoscaler's status gives no size range (unreadable, or the old text "
            "format), so min and max are unknown",
            f"read them from the cloud: gcloud container node-pools describe {pool.name} "
            f"--format='value(autoscaling)', or aws eks describe-nodegroup --query nodegroup.scalingConfig",
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
    """`pools.taint_problems` over each node's taints, else over the cloud's template for new nodes."""
    name, want = "pool-taint", taints.EXPECTED_GPU_TAINT
    if pool.nodes:
        bare = [(n.name, pools.taint_problems(n.taints)) for n in pool.nodes]
        bare = [(node, found) for node, found in bare if found]
        if bare:
            return Check(
                name,
                Status.FAIL,
                f"{pool.name}: node(s) {', '.join(node for node, _ in bare)}: {bare[0][1][0]}",
                taint_fix(pool, cluster),
            )
        found = {t for n in pool.nodes for t in n.taints if taints.is_gpu_taint(t)}
        return Check(
            name,
            Status.PASS,
            f"{pool.name}: all {len(pool.nodes)} node(s) carry {taints.render(sorted(found, key=str))}, "
            "so only pods that tolerate it land there",
        )
    if pool.view is not None:
        source = doctor_facts.source(pool.view)
        problems = pools.taint_problems(pool.view.taints)
        if problems:
            return Check(
                name,
                Status.FAIL,
                f"{pool.name}: no nodes now; {source}: {problems[0]}",
                taint_fix(pool, cluster),
            )
        gpu_taints = [t for t in pool.view.taints if taints.is_gpu_taint(t)]
        return Check(
            name,
            Status.PASS,
            f"{pool.name}: no nodes now; {source} gives new nodes {taints.render(gpu_taints)}",
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
        return _gpus_at_zero(pool)
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


def _gpus_at_zero(pool: PoolFacts) -> Check:
    """No node to look at: `pools.gpu_problems` over the cloud's view, else what cannot be known."""
    name, view = "gpu-advertising", pool.view
    if view is not None and pools.gpu_problems(view):
        return Check(
            name,
            Status.FAIL,
            f"{pool.name}: no nodes now; {doctor_facts.source(view)}: " + "; ".join(pools.gpu_problems(view)),
            "create the pool for a GPU profile: gpubot pool create --profile NAME",
        )
    promised = view.accelerator_count if view else None
    said = f"; {doctor_facts.source(view)} promises {promised} GPU(s) per node" if view and promised else ""
    where = {
        GKE: f"gcloud container node-pools describe {pool.name} --format='value(config.accelerators)'",
        EKS: f"the node group's ASG tag {pools.GPU_TAG}",
    }
    how = where.get(pool.cloud) or f"{where[GKE]}, or {where[EKS]}"
    return Check(
        name,
        Status.WARN,
        f"{pool.name}: no nodes, so whether the device plugin advertises {GPU} cannot be checked{said}",
        f"check the template ({how}), then run doctor again while a GPU workload keeps a node up",
    )
