"""Core: doctor's checks of the Cluster Autoscaler: its status ConfigMap, provisioning time, EKS tags.

The status is read by `autoscaler_status`, in either format the autoscaler writes; the node group's tags
are judged by `pools`' rules, the same `gpubot pool show` lists.
"""

from __future__ import annotations

import statistics
from datetime import timedelta

from bot.core import autoscaler_status, labels, notices, pools
from bot.core.doctor_facts import AutoscalerFacts, Check, Status
from bot.core.pools import PoolView

STATUS_CONFIGMAP = "kube-system/cluster-autoscaler-status"
FRESH_FOR = timedelta(minutes=2)
"""The autoscaler rewrites its status every scan (10 s by default); two minutes without means it stopped."""
PROVISION_WARN_SHARE = 0.7
"""Warn when the slowest scale-up used this share of max-node-provision-time: one bad day from a timeout."""
GPU = labels.GPU_RESOURCE


def autoscaler_health(facts: AutoscalerFacts) -> Check:
    name = "autoscaler-health"
    look = (
        "kubectl -n kube-system describe configmap cluster-autoscaler-status; on GKE, the autoscaler's "
        "logs in Cloud Logging"
    )
    if facts.error:
        return Check(
            name,
            Status.FAIL,
            f"could not read {STATUS_CONFIGMAP}: {facts.error}",
            "gpubot needs get on that ConfigMap (see the permissions check)",
        )
    if facts.text is None:
        return Check(
            name,
            Status.FAIL,
            f"no {STATUS_CONFIGMAP} ConfigMap: the Cluster Autoscaler is not running, or writes no status",
            "GKE runs it for pools with --enable-autoscaling; elsewhere deploy cluster-autoscaler (chart "
            "autoscaler/cluster-autoscaler) with --write-status-configmap=true and check its logs",
        )
    status = autoscaler_status.parse(facts.text)
    updated = facts.last_updated or autoscaler_status.parse_last_updated(status.time)
    age = max((facts.now - updated).total_seconds(), 0.0) if updated and facts.now else None
    if status.health != "Healthy":
        said = status.health or "not stated"
        return Check(
            name,
            Status.FAIL,
            f"{STATUS_CONFIGMAP}: cluster-wide health is {said}; an unhealthy autoscaler stops scaling "
            "(too many unready nodes, or it cannot reach the cloud)",
            f"see why: {look}; then fix or remove the unready nodes (kubectl get nodes)",
        )
    if age is None:
        return Check(
            name,
            Status.WARN,
            f"{STATUS_CONFIGMAP}: Healthy, but it carries no last-updated time, so freshness is unknown",
            look,
        )
    if age > FRESH_FOR.total_seconds():
        return Check(
            name,
            Status.FAIL,
            f"{STATUS_CONFIGMAP}: last updated {notices.format_elapsed(age)} ago (over 2m; it is rewritten "
            "every scan, 10s by default): the autoscaler has stopped or is stuck",
            "kubectl -n kube-system get pods -l app.kubernetes.io/name=cluster-autoscaler and read its logs; "
            "on GKE, the autoscaler's logs in Cloud Logging",
        )
    if status.autoscaler == "Initializing":
        return Check(
            name,
            Status.WARN,
            f"{STATUS_CONFIGMAP}: Healthy but still Initializing (updated {notices.format_elapsed(age)} ago)",
            "run doctor again in a minute",
        )
    return Check(name, Status.PASS, f"{STATUS_CONFIGMAP}: Healthy, updated {notices.format_elapsed(age)} ago")


def _duration(seconds: float) -> str:
    """`15m` for whole minutes, else as threads show durations (`4m10s`)."""
    return (
        f"{int(seconds // 60)}m" if seconds >= 60 and seconds % 60 == 0 else notices.format_elapsed(seconds)
    )


def provisioning_time(pool: str, samples: tuple[float, ...], limit: timedelta) -> Check:
    name, cap = "provisioning-time", _duration(limit.total_seconds())
    if not samples:
        return Check(
            name,
            Status.WARN,
            f"{pool}: no scale-up measured yet, so how close provisioning comes to the autoscaler's {cap} "
            "max-node-provision-time is unknown",
            "gpubot measures each scale-up it follows (kept in Redis, REDIS_URL); run one GPU workload "
            "through gpubot, then doctor again",
        )
    slowest, typical = max(samples), statistics.median(samples)
    share = slowest / limit.total_seconds()
    took = notices.format_elapsed(slowest)
    if share >= PROVISION_WARN_SHARE:
        return Check(
            name,
            Status.FAIL if share >= 1 else Status.WARN,
            f"{pool}: the slowest of {len(samples)} scale-up(s) took {took} to a usable GPU, {share:.0%} of "
            f"the {cap} max-node-provision-time: past it the autoscaler gives up on the node "
            "(ScaleUpTimedOut) and backs off",
            "raise --max-node-provision-time in the cluster-autoscaler's flags (GKE manages it), or boot "
            "faster: drivers preinstalled in the node image, smaller images",
        )
    return Check(
        name,
        Status.PASS,
        f"{pool}: scale-ups take {notices.format_elapsed(typical)} to a usable GPU (median of "
        f"{len(samples)}, slowest {took}), within {share:.0%} of the {cap} max-node-provision-time",
    )


def eks_node_template(view: PoolView) -> Check:
    """`pools.tag_problems`: at zero nodes the autoscaler knows a node group only from its ASG's tags."""
    name = "eks-node-template"
    if view.error:
        return Check(name, Status.FAIL, f"{view.name}: could not read the node group's tags: {view.error}")
    found = pools.tag_problems(view)
    if not found:
        gpus = (view.asg_tags or {}).get(pools.GPU_TAG, "")
        return Check(
            name,
            Status.PASS,
            f"{view.name}: ASG {view.asg_name} has node-template tags for {len(view.labels)} label(s), "
            f"{len(view.taints)} taint(s) and {GPU}={gpus}, and both auto-discovery tags",
        )
    if not view.asg_name:
        return Check(
            name, Status.FAIL, f"{view.name}: " + "; ".join(found), "wait for the node group to be ACTIVE"
        )
    tags = " ".join(
        f"ResourceId={view.asg_name},ResourceType=auto-scaling-group,Key={k},Value={v},PropagateAtLaunch=false"
        for k, v in pools.wanted_tags(view).items()
    )
    return Check(
        name,
        Status.FAIL,
        f"{view.name}: " + "; ".join(found),
        f"aws autoscaling create-or-update-tags --tags {tags}",
    )
