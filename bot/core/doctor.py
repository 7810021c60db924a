"""Core: `gpubot doctor`'s pre-flight checks, each a pure function from gathered facts to a verdict and a fix.

Most scale-from-zero incidents are setup mistakes that stay silent until the first user waits forever.
Every check names what it saw; a failure says the one command or edit that fixes it; what cannot be
known (a pool at zero nodes with no cloud template read) is a warning, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from bot.core import doctor_autoscaler, doctor_kueue, doctor_pools, doctor_scheduling, labels
from bot.core.doctor_facts import EKS, AccessRule, Check, Facts, Status

GPU = labels.GPU_RESOURCE


def required_access(
    namespace: str, *, warm_configmap: str = "", lease_name: str = ""
) -> tuple[AccessRule, ...]:
    """Everything gpubot does to the cluster, as RBAC verbs: its pods and their logs, events and Lease,
    nodes, CA status and the warm schedules' ConfigMap. Listing pods in every namespace (to name someone
    else's pod that keeps a pool from draining) is optional: without it the bot judges its own pods."""
    pod_verbs = ("create", "delete", "get", "list", "watch", "patch")
    pods = [AccessRule(v, "pods", namespace=namespace) for v in pod_verbs]
    logs = AccessRule("get", "pods", namespace=namespace, subresource="log")
    events = [AccessRule(v, "events", namespace=namespace) for v in ("list", "watch")]
    nodes = [AccessRule(v, "nodes") for v in ("list", "watch")]
    # RBAC cannot bind `create` to a name (the name is not known before the object exists).
    leases = [
        AccessRule(v, "leases", "coordination.k8s.io", namespace, name="" if v == "create" else lease_name)
        for v in ("get", "create", "update")
    ]
    status = AccessRule("get", "configmaps", namespace="kube-system", name="cluster-autoscaler-status")
    warm = [
        AccessRule(v, "configmaps", namespace=namespace, name=warm_configmap)
        for v in ("get", "watch", "update")
        if warm_configmap
    ]
    return (*pods, logs, *events, *nodes, *leases, status, *warm)


SLACK_MARKS = {
    Status.PASS: ":white_check_mark:",
    Status.WARN: ":warning:",
    Status.FAIL: ":x:",
    Status.SKIP: ":heavy_minus_sign:",
}


def summary(checks: list[Check]) -> str:
    counts = {status: sum(c.status is status for c in checks) for status in Status}
    return (
        f"{counts[Status.PASS]} passed, {counts[Status.WARN]} warned, {counts[Status.FAIL]} failed, "
        f"{counts[Status.SKIP]} skipped"
    )


def slack_report(checks: list[Check]) -> str:
    """`/gpu doctor`'s answer: failures first, each with its fix, then the rest, then the counts."""
    order = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 3}
    lines = ["*gpubot doctor*"]
    for check in sorted(checks, key=lambda c: order[c.status]):
        lines.append(f"{SLACK_MARKS[check.status]} *{check.name}*: {check.message}")
        if check.fix and check.status in (Status.FAIL, Status.WARN):
            lines.append(f"      fix: {check.fix}")
    lines.append(summary(checks))
    return "\n".join(lines)


def run_checks(facts: Facts) -> list[Check]:
    """Every check, in the order an operator fixes things: config, pool, scheduling, GPUs, CA, RBAC."""
    resources = frozenset(p.resource_name for p in facts.profiles.values()) or frozenset({GPU})
    if facts.cluster_error:
        return [
            Check(
                "cluster",
                Status.FAIL,
                f"could not read the cluster: {facts.cluster_error}",
                "check KUBECONFIG (or GPUBOT_KUBE_CONTEXT), then that the API answers: kubectl get nodes",
            ),
            permissions(facts),
        ]
    out: list[Check] = []
    if facts.cloud_error:
        out.append(
            Check(
                "cloud",
                Status.WARN,
                f"could not read the {facts.cloud.upper()} node pools: {facts.cloud_error}; pools at zero "
                "nodes are judged without their templates",
                "check --cluster, --project, --location, --region, --endpoint and the cloud credentials",
            )
        )
    if facts.profiles_error:
        out.append(Check("profiles", Status.FAIL, facts.profiles_error, "fix the profiles file, run again"))
    for name in facts.unknown_pools:
        out.append(
            Check(
                "pool-sizing",
                Status.FAIL,
                f"no pool named {name}; the cluster has {', '.join(facts.known_pools) or 'none'}",
                "name one of those with --pool, or create the pool",
            )
        )
    if not facts.pools and not facts.unknown_pools:
        out.append(
            Check(
                "pool-sizing",
                Status.FAIL,
                "no GPU pool found: no node looks like a GPU node and the autoscaler scales no pool at zero",
                "create the GPU pool with autoscaling from 0 (see docs/deploy.md), or name it with --pool",
            )
        )
    for pool in facts.pools:
        out += [doctor_pools.pool_sizing(pool, facts.cluster), doctor_pools.pool_taint(pool, facts.cluster)]
    out += doctor_scheduling.profile_checks(facts.profiles, facts.pools)
    out += doctor_kueue.kueue_checks(facts.profiles, facts.kueue, facts.namespace)
    if facts.manifest is not None:
        out += doctor_scheduling.manifest_checks(facts.manifest, facts.pools, resources)
    out += [doctor_pools.gpu_advertising(pool, facts.autoscaler.now) for pool in facts.pools]
    out.append(doctor_autoscaler.autoscaler_health(facts.autoscaler))
    limit = facts.max_node_provision_time
    out += [
        doctor_autoscaler.provisioning_time(p.name, facts.provisioning.get(p.name, ()), limit)
        for p in facts.pools
    ]
    if facts.eks is None:
        said = (
            f"the cluster is on {facts.cloud.upper()}: node-template tags are an EKS matter"
            if facts.cloud and facts.cloud != EKS
            else "not configured: pass --cloud eks --cluster NAME to check the node groups' ASG tags"
        )
        out.append(Check("eks-node-template", Status.SKIP, said))
    else:
        out += [doctor_autoscaler.eks_node_template(group) for group in facts.eks]
    out.append(permissions(facts))
    return out


def permissions(facts: Facts) -> Check:
    name, found = "permissions", facts.permissions
    if found.error:
        return Check(
            name,
            Status.WARN,
            f"could not ask the API server what gpubot may do (SelfSubjectAccessReview): {found.error}",
            "check the kubeconfig and that the API server serves authorization.k8s.io/v1",
        )
    if not found.answers:
        return Check(name, Status.WARN, "no permission was probed", "run doctor against the cluster")
    denied = [a for a in found.answers if not a.allowed]
    if denied:
        return Check(
            name,
            Status.FAIL,
            "denied: " + "; ".join(str(a.rule) for a in denied),
            "grant them in the Role and ClusterRole bound to gpubot's service account (the Helm chart's RBAC "
            "has exactly these), then check: kubectl auth can-i VERB RESOURCE -n NAMESPACE "
            "--as system:serviceaccount:NAMESPACE:gpubot",
        )
    return Check(
        name,
        Status.PASS,
        f"all {len(found.answers)} permissions gpubot needs are granted to the credentials doctor runs "
        f"with: {summarise(a.rule for a in found.answers)}",
    )


def summarise(rules: Iterable[AccessRule]) -> str:
    """`pods create/delete in default; nodes list/watch`: verbs grouped by what they act on."""
    grouped: dict[str, list[str]] = {}
    for rule in rules:
        target = str(replace(rule, verb="")).strip()
        grouped.setdefault(target, []).append(rule.verb)
    parts = []
    for target, verbs in grouped.items():
        what, _, where = target.partition(" in ")
        parts.append(f"{what} {'/'.join(verbs)}" + (f" in {where}" if where else ""))
    return "; ".join(parts)
