"""`gpubot doctor`'s checks as tables: facts in, verdict and words out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import doctor, doctor_autoscaler, doctor_pools, doctor_scheduling, models, pools, taints
from bot.core.cluster_nodes import Node
from bot.core.doctor_facts import (
    EKS,
    GKE,
    AccessAnswer,
    AutoscalerFacts,
    Facts,
    Manifest,
    Permissions,
    PoolFacts,
    Status,
    assemble_pools,
)
from sim import seed

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
GPU_TAINT = taints.Taint("nvidia.com/gpu", "present", "NoSchedule")
POOL_LABELS = {"app-type": "gpu-workloads", "cloud.google.com/gke-nodepool": "gpu-pool"}
T4 = models.GpuProfile(
    name="t4",
    tolerations=(models.Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),),
    node_selector=(("app-type", "gpu-workloads"),),
)
MIG = "https://www.googleapis.com/compute/v1/projects/demo/zones/local-a/instanceGroups/gke-demo-gpu-pool-grp"


def gpu_node(name: str = "gke-demo-gpu-pool-1", **overrides: object) -> Node:
    fields: dict[str, object] = {
        "name": name,
        "pool": "gpu-pool",
        "ready": True,
        "ready_since": NOW - timedelta(hours=1),
        "labels": POOL_LABELS,
        "taints": (GPU_TAINT,),
        "gpus": 1,
    }
    return Node(**(fields | overrides))  # type: ignore[arg-type]


def cloud_view(cloud: pools.Cloud = pools.Cloud.GKE, **changes: object) -> pools.PoolView:
    """A GPU pool as its cloud reports it, right in every way unless changed."""
    eks = cloud is pools.Cloud.EKS
    fields: dict[str, object] = {
        "cloud": cloud,
        "name": "gpu-ng" if eks else "gpu-pool",
        "cluster": "demo",
        "status": "ACTIVE" if eks else "RUNNING",
        "autoscaling": True,
        "min_size": 0,
        "max_size": 5,
        "current_size": None,
        "machine_type": "g4dn.xlarge" if eks else "n1-standard-4",
        "accelerator_type": "nvidia-tesla-t4",
        "accelerator_count": 1,
        "labels": {"app-type": "gpu-workloads"} if eks else POOL_LABELS,
        "taints": (GPU_TAINT,),
        "ami_type": pools.EKS_GPU_AMI if eks else "",
        "asg_name": "eks-gpu-ng-asg" if eks else "",
        "asg_tags": {} if eks else None,
    }
    return pools.PoolView(**(fields | changes))  # type: ignore[arg-type]


def pool(**overrides: object) -> PoolFacts:
    fields: dict[str, object] = {
        "name": "gpu-pool",
        "min_size": 0,
        "max_size": 5,
        "autoscaled": True,
        "cloud": GKE,
    }
    return PoolFacts(**(fields | overrides))  # type: ignore[arg-type]


def toleration(
    key: str = "nvidia.com/gpu", operator: str = "Equal", value: str = "", effect: str = ""
) -> models.Toleration:
    return models.Toleration(key, operator, value, effect)


# -- the scheduler's matching rule ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "taint", "expected"),
    [
        (toleration(value="present", effect="NoSchedule"), GPU_TAINT, True),
        (toleration(value="present"), GPU_TAINT, True),  # empty effect matches every effect
        (toleration(value="true", effect="NoSchedule"), GPU_TAINT, False),  # the value must match
        (toleration(operator="", value="present"), GPU_TAINT, True),  # empty operator is Equal
        (toleration(operator="Exists"), GPU_TAINT, True),
        (toleration(operator="Exists", effect="NoExecute"), GPU_TAINT, False),
        (toleration(key="", operator="Exists"), taints.Taint("team", "ml", "NoExecute"), True),
        (toleration(key="gpu", operator="Exists"), GPU_TAINT, False),
        (toleration(operator="Contains", value="present"), GPU_TAINT, False),
    ],
)
def test_tolerates_follows_upstream(given: models.Toleration, taint: taints.Taint, expected: bool) -> None:
    assert taints.tolerates(given, taint) is expected


def test_prefer_no_schedule_never_keeps_a_pod_off() -> None:
    soft = taints.Taint("DeletionCandidateOfClusterAutoscaler", "1", "PreferNoSchedule")
    assert taints.untolerated([], [soft, GPU_TAINT]) == [GPU_TAINT]


# -- pool sizing and taint --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "status", "message"),
    [
        (pool(), Status.PASS, "gpu-pool: min 0, max 5: scales from zero up to 5 node(s)"),
        (
            pool(min_size=1),
            Status.FAIL,
            "gpu-pool: min size is 1: that many GPU nodes run, and are billed, while nobody uses them; set "
            "--min 0 (a pre-warm schedule raises it only when wanted)",
        ),
        (
            pool(max_size=0),
            Status.FAIL,
            "gpu-pool: max size is 0: the pool can never scale up; set --max to at least 1",
        ),
        (
            pool(autoscaled=False, min_size=None, max_size=None),
            Status.FAIL,
            "gpu-pool: autoscaling is off: the Cluster Autoscaler never adds or removes nodes; turn it on "
            "with `gpubot pool set --min 0 --max N`",
        ),
        (
            pool(autoscaled=None, min_size=None, max_size=None),
            Status.WARN,
            "gpu-pool: the autoscaler's status gives no size range (unreadable, or the old text format), so "
            "min and max are unknown",
        ),
    ],
)
def test_pool_sizing(facts: PoolFacts, status: Status, message: str) -> None:
    check = doctor_pools.pool_sizing(facts, "demo")
    assert (check.name, check.status, check.message) == ("pool-sizing", status, message)


def test_pool_sizing_fixes_name_the_cloud_command() -> None:
    assert doctor_pools.pool_sizing(pool(min_size=1), "demo").fix == (
        "gcloud container node-pools update gpu-pool --cluster demo --enable-autoscaling --min-nodes 0 "
        "--max-nodes 5"
    )
    assert doctor_pools.pool_sizing(pool(min_size=2, cloud=EKS, name="gpu-ng"), "").fix == (
        "aws eks update-nodegroup-config --cluster-name CLUSTER --nodegroup-name gpu-ng "
        "--scaling-config minSize=0,maxSize=5,desiredSize=0"
    )


GKE_VIEW = cloud_view()


@pytest.mark.parametrize(
    ("facts", "status", "message"),
    [
        (
            pool(nodes=(gpu_node(),)),
            Status.PASS,
            "gpu-pool: all 1 node(s) carry nvidia.com/gpu=present:NoSchedule, so only pods that tolerate it "
            "land there",
        ),
        (
            pool(nodes=(gpu_node(), gpu_node("bare", taints=()))),
            Status.FAIL,
            "gpu-pool: node(s) bare: no nvidia.com/gpu taint: any pod may land on a GPU node and keep it "
            "from scaling down; taint the pool nvidia.com/gpu=present:NoSchedule",
        ),
        (
            pool(view=GKE_VIEW),
            Status.PASS,
            "gpu-pool: no nodes now; the GKE node pool's config (gpu-pool) gives new nodes "
            "nvidia.com/gpu=present:NoSchedule",
        ),
        (
            pool(view=cloud_view(pools.Cloud.EKS, taints=())),
            Status.FAIL,
            "gpu-pool: no nodes now; the EKS node group (gpu-ng): no nvidia.com/gpu taint: any pod may land "
            "on a GPU node and keep it from scaling down; taint the pool nvidia.com/gpu=present:NoSchedule",
        ),
        (
            pool(),
            Status.WARN,
            "gpu-pool: unknown: the pool has no nodes and no cloud template was read, so whether new nodes "
            "get the nvidia.com/gpu=present:NoSchedule taint cannot be told",
        ),
    ],
)
def test_pool_taint(facts: PoolFacts, status: Status, message: str) -> None:
    check = doctor_pools.pool_taint(facts, "demo")
    assert (check.status, check.message) == (status, message)
    assert bool(check.fix) is (status is not Status.PASS)


def test_a_taint_of_any_value_counts_and_transient_taints_are_not_the_pools() -> None:
    eks_taint = taints.Taint("nvidia.com/gpu", "true", "NoSchedule")
    not_ready = taints.Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
    facts = pool(nodes=(gpu_node(taints=(eks_taint, not_ready)),))
    assert doctor_pools.pool_taint(facts).status is Status.PASS
    assert facts.known_taints() == (eks_taint,)


# -- GPU advertising ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "status", "message"),
    [
        (
            pool(nodes=(gpu_node(), gpu_node("n2", gpus=2))),
            Status.PASS,
            "gpu-pool: 2 Ready node(s) advertise 3 allocatable nvidia.com/gpu, so the device plugin runs",
        ),
        (
            pool(nodes=(gpu_node(gpus=0),)),
            Status.FAIL,
            "gpu-pool: Ready node(s) gke-demo-gpu-pool-1 advertise no nvidia.com/gpu: no NVIDIA device "
            "plugin (or GPU operator) runs there, so GPU pods never schedule",
        ),
        (
            pool(nodes=(gpu_node(gpus=0, ready_since=NOW - timedelta(minutes=3)),)),
            Status.WARN,
            "gpu-pool: node(s) gke-demo-gpu-pool-1, Ready for under 15m, advertise no nvidia.com/gpu yet "
            "(drivers and the device plugin may take that long)",
        ),
        (
            pool(nodes=(gpu_node(ready=False, gpus=0),)),
            Status.WARN,
            "gpu-pool: 1 node(s), none Ready yet, so GPU advertising cannot be checked",
        ),
        (
            pool(),
            Status.WARN,
            "gpu-pool: no nodes, so whether the device plugin advertises nvidia.com/gpu cannot be checked",
        ),
        (
            pool(view=GKE_VIEW),
            Status.WARN,
            "gpu-pool: no nodes, so whether the device plugin advertises nvidia.com/gpu cannot be checked; "
            "the GKE node pool's config (gpu-pool) promises 1 GPU(s) per node",
        ),
    ],
)
def test_gpu_advertising(facts: PoolFacts, status: Status, message: str) -> None:
    check = doctor_pools.gpu_advertising(facts, NOW)
    assert (check.status, check.message) == (status, message)


def test_at_zero_nodes_the_fix_says_how_to_check_the_template() -> None:
    assert doctor_pools.gpu_advertising(pool(), NOW).fix == (
        "check the template (gcloud container node-pools describe gpu-pool "
        "--format='value(config.accelerators)'), then run doctor again while a GPU workload keeps a node up"
    )
    assert "ASG tag k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu" in (
        doctor_pools.gpu_advertising(pool(cloud=EKS), NOW).fix
    )


# -- profiles ------------------------------------------------------------------------------------------


def profile_check(profile: models.GpuProfile, facts: PoolFacts) -> tuple[Status, str, str]:
    [check] = doctor_scheduling.profile_checks({profile.name: profile}, [facts])
    assert check.name == "profile-tolerations"
    return check.status, check.message, check.fix


def test_a_profile_that_tolerates_the_pool_passes() -> None:
    assert profile_check(T4, pool(nodes=(gpu_node(),))) == (
        Status.PASS,
        "profile t4 → gpu-pool: tolerates nvidia.com/gpu=present:NoSchedule (gpu-pool's taints)",
        "",
    )


def test_a_wrong_value_is_rescued_only_by_gkes_admission_plugin() -> None:
    wrong = models.GpuProfile(
        name="t4",
        tolerations=(toleration(value="true", effect="NoSchedule"),),
        node_selector=T4.node_selector,
    )
    status, message, fix = profile_check(wrong, pool(nodes=(gpu_node(),)))
    assert status is Status.WARN
    assert message == (
        "profile t4 → gpu-pool: no toleration for nvidia.com/gpu=present:NoSchedule (gpu-pool's taints); its "
        "pods get on only because GKE's ExtendedResourceToleration admission adds one for pods that request "
        "nvidia.com/gpu, which other clusters (EKS) lack"
    )
    assert fix == (
        "add to the tolerations in profiles.t4 of the profiles file (GPUBOT_PROFILES_FILE): "
        "{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}"
    )
    on_eks = pool(cloud=EKS, nodes=(gpu_node(labels={"app-type": "gpu-workloads"}),))
    assert profile_check(wrong, on_eks)[:2] == (
        Status.FAIL,
        "profile t4 → gpu-pool: does not tolerate nvidia.com/gpu=present:NoSchedule (gpu-pool's taints), so "
        'its pods stay Pending ("untolerated taint") and trigger no scale-up',
    )


def test_another_taint_fails_even_on_gke() -> None:
    team = taints.Taint("team", "ml", "NoSchedule")
    status, message, _ = profile_check(T4, pool(nodes=(gpu_node(taints=(GPU_TAINT, team)),)))
    assert (status, message) == (
        Status.FAIL,
        "profile t4 → gpu-pool: does not tolerate team=ml:NoSchedule (gpu-pool's taints), so its pods stay "
        'Pending ("untolerated taint") and trigger no scale-up',
    )


def test_a_profile_whose_selector_matches_no_pool_fails() -> None:
    elsewhere = models.GpuProfile(name="a100", tolerations=T4.tolerations, node_selector=(("gpu", "a100"),))
    status, message, _ = profile_check(elsewhere, pool(nodes=(gpu_node(),)))
    assert (status, message) == (
        Status.FAIL,
        "profile a100: its nodeSelector gpu=a100 matches no GPU pool's nodes (gpu-pool), so its pods trigger "
        "no scale-up (\"didn't match Pod's node affinity/selector\")",
    )


def test_at_zero_nodes_without_a_template_the_expected_taint_is_the_yardstick() -> None:
    assert profile_check(T4, pool()) == (
        Status.PASS,
        "profile t4 → gpu-pool: tolerates nvidia.com/gpu=present:NoSchedule (the expected GPU taint; "
        "gpu-pool's own are unknown at zero nodes)",
        "",
    )


# -- --manifest ----------------------------------------------------------------------------------------


def manifest_checks(text: str, pools: tuple[PoolFacts, ...] = ()) -> dict[str, tuple[Status, str]]:
    checks = doctor_scheduling.manifest_checks(
        Manifest("pod.yaml", text), pools or (pool(nodes=(gpu_node(),)),), frozenset({"nvidia.com/gpu"})
    )
    return {c.name: (c.status, c.message) for c in checks}


def test_the_seeds_important_typo_is_caught_with_its_fix() -> None:
    found = manifest_checks(seed.SEED_MANIFEST, (pool(cloud=EKS, nodes=(gpu_node(),)),))
    assert found["manifest-fields"] == (
        Status.FAIL,
        'pod.yaml: spec.tolerations[0]: unknown field "important" — did you mean "key"?; '
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
        'which means "match all values and all keys"',
    )
    assert found["manifest-tolerations"] == (
        Status.FAIL,
        "pod.yaml (Pod gpu-pod) → gpu-pool: does not tolerate nvidia.com/gpu=present:NoSchedule (gpu-pool's "
        "taints; spec.tolerations[0] does not count, see manifest-fields), so its pods stay Pending "
        '("untolerated taint") and trigger no scale-up',
    )
    assert found["manifest-gpu-limits"] == (
        Status.PASS,
        "pod.yaml (Pod gpu-pod): asks for nvidia.com/gpu in limits (cuda-container 1)",
    )


def test_the_corrected_seed_manifest_passes() -> None:
    found = manifest_checks(seed.CORRECTED_MANIFEST)
    assert {name: status for name, (status, _) in found.items()} == {
        "manifest-fields": Status.PASS,
        "manifest-tolerations": Status.PASS,
        "manifest-gpu-limits": Status.PASS,
    }
    assert found["manifest-fields"][1] == (
        "pod.yaml: every field of the pod spec, its containers and its tolerations is a Kubernetes field"
    )


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer}
spec:
  template:
    spec:
      toleration:
      - {key: nvidia.com/gpu, operator: Exists}
      containers:
      - name: train
        image: pytorch/pytorch
        resources: {request: {nvidia.com/gpu: 1}}
"""


def test_a_deployments_pod_template_is_checked_with_its_own_paths() -> None:
    found = manifest_checks(DEPLOYMENT)
    assert found["manifest-fields"] == (
        Status.FAIL,
        'pod.yaml: spec.template.spec: unknown field "toleration" — did you mean "tolerations"?; '
        'spec.template.spec.containers[0].resources: unknown field "request" — did you mean "requests"?',
    )
    assert found["manifest-gpu-limits"] == (
        Status.FAIL,
        "pod.yaml (Deployment trainer): no container sets nvidia.com/gpu in resources.limits, so the pod "
        "gets no GPU and triggers no GPU scale-up",
    )


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            "{requests: {nvidia.com/gpu: 1}}",
            "pod.yaml (Pod p): container(s) c request nvidia.com/gpu without a limit; the API server refuses "
            "that (extended resources are set in limits)",
        ),
        (
            "{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}",
            "pod.yaml (Pod p): container(s) c request a different nvidia.com/gpu count than their limit; the "
            "API server refuses that (requests must equal limits for GPUs)",
        ),
    ],
)
def test_gpu_requests_need_equal_limits(resources: str, message: str) -> None:
    container = f"{{name: c, image: i, resources: {resources}}}"
    text = f"kind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - {container}\n"
    assert manifest_checks(text)["manifest-gpu-limits"] == (Status.FAIL, message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\nspec: [", "pod.yaml: not valid YAML:"),
        ("kind: Service\nmetadata: {name: s}\n", "pod.yaml: no Pod or pod template (CronJob, DaemonSet,"),
        ("- just a list\n", "pod.yaml: each YAML document must be a Kubernetes object (a mapping)"),
    ],
)
def test_a_manifest_without_a_pod_says_so(text: str, message: str) -> None:
    status, found = manifest_checks(text)["manifest-fields"]
    assert status is Status.FAIL and found.startswith(message), found


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            {"key": "k", "operator": "Equals"},
            '[0].operator: Unsupported value: "Equals": supported values: "Equal", "Exists"',
        ),
        (
            {"key": "k", "operator": "Exists", "value": "v"},
            "[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
        ),
        (
            {"key": "k", "value": "v", "effect": "NoRun"},
            '[0].effect: Unsupported value: "NoRun": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"',
        ),
        (
            {"key": "k", "value": "v", "tolerationSeconds": 30},
            "[0].effect: Invalid value: \"\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
    ],
)
def test_toleration_values_are_validated_as_the_api_server_does(
    entry: dict[str, object], problem: str
) -> None:
    assert taints.toleration_problems(entry, "[0]") == [problem]


# -- the autoscaler ------------------------------------------------------------------------------------

YAML_STATUS = """\
time: "2026-12-03 08:59:50.123456789 +0000 UTC"
autoscalerStatus: Running
clusterWide:
  health: {status: %s}
nodeGroups:
- name: %s
  health: {status: Healthy, minSize: 0, maxSize: 5}
"""
TEXT_STATUS = """\
Cluster-autoscaler status at 2026-12-03 08:59:50 +0000 UTC:
Cluster-wide:
  Health:      Healthy (ready=3 unready=0 notStarted=0 longNotStarted=0 registered=3)
"""


def status_facts(
    health: str = "Healthy", *, age: timedelta = timedelta(seconds=10), **overrides: object
) -> AutoscalerFacts:
    fields: dict[str, object] = {"text": YAML_STATUS % (health, MIG), "last_updated": NOW - age, "now": NOW}
    return AutoscalerFacts(**(fields | overrides))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("facts", "status", "message"),
    [
        (status_facts(), Status.PASS, "kube-system/cluster-autoscaler-status: Healthy, updated 10s ago"),
        (
            status_facts(last_updated=None, text=TEXT_STATUS),
            Status.PASS,
            "kube-system/cluster-autoscaler-status: Healthy, updated 10s ago",
        ),
        (
            status_facts("Unhealthy"),
            Status.FAIL,
            "kube-system/cluster-autoscaler-status: cluster-wide health is Unhealthy; an unhealthy "
            "autoscaler stops scaling (too many unready nodes, or it cannot reach the cloud)",
        ),
        (
            status_facts(age=timedelta(minutes=12)),
            Status.FAIL,
            "kube-system/cluster-autoscaler-status: last updated 12m00s ago (over 2m; it is rewritten every "
            "scan, 10s by default): the autoscaler has stopped or is stuck",
        ),
        (
            status_facts(text=(YAML_STATUS % ("Healthy", MIG)).replace("Running", "Initializing")),
            Status.WARN,
            "kube-system/cluster-autoscaler-status: Healthy but still Initializing (updated 10s ago)",
        ),
        (
            status_facts(last_updated=None, text="clusterWide: {health: {status: Healthy}}"),
            Status.WARN,
            "kube-system/cluster-autoscaler-status: Healthy, but it carries no last-updated time, so "
            "freshness is unknown",
        ),
        (
            AutoscalerFacts(text=None, now=NOW),
            Status.FAIL,
            "no kube-system/cluster-autoscaler-status ConfigMap: the Cluster Autoscaler is not running, or "
            "writes no status",
        ),
        (
            AutoscalerFacts(error="configmaps is forbidden", now=NOW),
            Status.FAIL,
            "could not read kube-system/cluster-autoscaler-status: configmaps is forbidden",
        ),
        (
            status_facts(age=timedelta(seconds=-30)),
            Status.PASS,
            "kube-system/cluster-autoscaler-status: Healthy, updated 0s ago",
        ),
    ],
)
def test_autoscaler_health(facts: AutoscalerFacts, status: Status, message: str) -> None:
    check = doctor_autoscaler.autoscaler_health(facts)
    assert (check.name, check.status, check.message) == ("autoscaler-health", status, message)


LIMIT = timedelta(minutes=15)


@pytest.mark.parametrize(
    ("samples", "status", "message"),
    [
        (
            (240.0, 300.0, 200.0),
            Status.PASS,
            "gpu-pool: scale-ups take 4m00s to a usable GPU (median of 3, slowest 5m00s), within 33% of "
            "the 15m max-node-provision-time",
        ),
        (
            (240.0, 660.0),
            Status.WARN,
            "gpu-pool: the slowest of 2 scale-up(s) took 11m00s to a usable GPU, 73% of the 15m "
            "max-node-provision-time: past it the autoscaler gives up on the node (ScaleUpTimedOut) and "
            "backs off",
        ),
        (
            (990.0,),
            Status.FAIL,
            "gpu-pool: the slowest of 1 scale-up(s) took 16m30s to a usable GPU, 110% of the 15m "
            "max-node-provision-time: past it the autoscaler gives up on the node (ScaleUpTimedOut) and "
            "backs off",
        ),
        (
            (),
            Status.WARN,
            "gpu-pool: no scale-up measured yet, so how close provisioning comes to the autoscaler's 15m "
            "max-node-provision-time is unknown",
        ),
    ],
)
def test_provisioning_time(samples: tuple[float, ...], status: Status, message: str) -> None:
    check = doctor_autoscaler.provisioning_time("gpu-pool", samples, LIMIT)
    assert (check.status, check.message) == (status, message)


# -- EKS node-template tags ------------------------------------------------------------------------

TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"
GOOD_TAGS = {
    f"{TEMPLATE}label/app-type": "gpu-workloads",
    f"{TEMPLATE}taint/nvidia.com/gpu": "present:NoSchedule",
    f"{TEMPLATE}resources/nvidia.com/gpu": "1",
    "k8s.io/cluster-autoscaler/enabled": "true",
    "k8s.io/cluster-autoscaler/demo": "owned",
}


def node_group(tags: dict[str, str], error: str = "") -> pools.PoolView:
    return cloud_view(pools.Cloud.EKS, asg_tags=tags, error=error)


def test_eks_node_template_tags() -> None:
    assert doctor_autoscaler.eks_node_template(node_group(GOOD_TAGS)).message == (
        "gpu-ng: ASG eks-gpu-ng-asg has node-template tags for 1 label(s), 1 taint(s) and nvidia.com/gpu=1, "
        "and both auto-discovery tags"
    )
    missing = {k: v for k, v in GOOD_TAGS.items() if "node-template" not in k}
    check = doctor_autoscaler.eks_node_template(node_group(missing))
    assert check.status is Status.FAIL
    assert check.message.startswith(
        f"gpu-ng: ASG eks-gpu-ng-asg lacks the tag {TEMPLATE}label/app-type=gpu-workloads: at zero nodes the "
        "Cluster Autoscaler does not know new nodes get this label"
    )
    assert [k for k in GOOD_TAGS if f"lacks the tag {k}=" in check.message] == [
        f"{TEMPLATE}label/app-type",
        f"{TEMPLATE}taint/nvidia.com/gpu",
        f"{TEMPLATE}resources/nvidia.com/gpu",
    ]
    assert check.fix.startswith(
        "aws autoscaling create-or-update-tags --tags ResourceId=eks-gpu-ng-asg,"
        f"ResourceType=auto-scaling-group,Key={TEMPLATE}label/app-type,Value=gpu-workloads,"
        "PropagateAtLaunch=false "
    )


def test_a_node_group_without_its_auto_scaling_group_yet_fails_until_active() -> None:
    check = doctor_autoscaler.eks_node_template(cloud_view(pools.Cloud.EKS, asg_name=""))
    assert (check.status, check.fix) == (Status.FAIL, "wait for the node group to be ACTIVE")
    assert "no Auto Scaling group yet" in check.message


@pytest.mark.parametrize(
    "tags",
    [
        GOOD_TAGS | {f"{TEMPLATE}resources/nvidia.com/gpu": "one"},
        GOOD_TAGS | {f"{TEMPLATE}taint/nvidia.com/gpu": "true:NoSchedule"},
        {k: v for k, v in GOOD_TAGS.items() if k != "k8s.io/cluster-autoscaler/demo"},
    ],
)
def test_wrong_or_missing_tags_fail(tags: dict[str, str]) -> None:
    assert doctor_autoscaler.eks_node_template(node_group(tags)).status is Status.FAIL


def test_unreadable_tags_fail_with_the_reason() -> None:
    check = doctor_autoscaler.eks_node_template(node_group({}, error="AccessDenied"))
    assert (check.status, check.message) == (
        Status.FAIL,
        "gpu-ng: could not read the node group's tags: AccessDenied",
    )


# -- permissions and the whole run -------------------------------------------------------------------


def test_required_access_is_what_gpubot_does() -> None:
    rules = [str(rule) for rule in doctor.required_access("ml")]
    assert rules == [
        "create pods in ml", "delete pods in ml", "get pods in ml", "list pods in ml", "watch pods in ml",
        "patch pods in ml", "get pods/log in ml", "list events in ml", "watch events in ml", "list nodes",
        "watch nodes",
        "get leases.coordination.k8s.io in ml", "create leases.coordination.k8s.io in ml",
        "update leases.coordination.k8s.io in ml", "get configmaps/cluster-autoscaler-status in kube-system",
    ]  # fmt: skip
    warm = [str(rule) for rule in doctor.required_access("ml", warm_configmap="gpubot-warm")][len(rules) :]
    assert warm == [
        "get configmaps/gpubot-warm in ml", "watch configmaps/gpubot-warm in ml",
        "update configmaps/gpubot-warm in ml",
    ]  # fmt: skip
    named = [
        str(r) for r in doctor.required_access("ml", lease_name="gpubot-leader") if r.resource == "leases"
    ]
    assert named == [  # RBAC binds get and update to the Lease's name; create cannot be
        "get leases.coordination.k8s.io/gpubot-leader in ml", "create leases.coordination.k8s.io in ml",
        "update leases.coordination.k8s.io/gpubot-leader in ml",
    ]  # fmt: skip


def permissions_check(answers: Permissions) -> tuple[Status, str]:
    check = doctor.permissions(Facts(permissions=answers))
    return check.status, check.message


def test_permissions() -> None:
    rules = doctor.required_access("default")
    allowed = tuple(AccessAnswer(rule, True) for rule in rules)
    assert permissions_check(Permissions(allowed)) == (
        Status.PASS,
        "all 15 permissions gpubot needs are granted to the credentials doctor runs with: pods "
        "create/delete/get/list/watch/patch in default; pods/log get in default; "
        "events list/watch in default; nodes list/watch; "
        "leases.coordination.k8s.io get/create/update in default; "
        "configmaps/cluster-autoscaler-status get in kube-system",
    )
    denied = (AccessAnswer(rules[0], False), AccessAnswer(rules[10], False), *allowed[1:10])
    assert permissions_check(Permissions(denied)) == (
        Status.FAIL,
        "denied: create pods in default; watch nodes",
    )
    assert permissions_check(Permissions(error="404 page not found")) == (
        Status.WARN,
        "could not ask the API server what gpubot may do (SelfSubjectAccessReview): 404 page not found",
    )


def test_a_healthy_setup_passes_every_check_but_the_eks_one_it_skips() -> None:
    facts = Facts(
        pools=(pool(nodes=(gpu_node(),)),),
        autoscaler=status_facts(),
        profiles={"t4": T4},
        manifest=Manifest("pod.yaml", seed.CORRECTED_MANIFEST),
        provisioning={"gpu-pool": (240.0,)},
        permissions=Permissions(tuple(AccessAnswer(r, True) for r in doctor.required_access("default"))),
    )
    checks = doctor.run_checks(facts)
    assert [(c.name, c.status) for c in checks] == [
        ("pool-sizing", Status.PASS),
        ("pool-taint", Status.PASS),
        ("profile-tolerations", Status.PASS),
        ("manifest-fields", Status.PASS),
        ("manifest-tolerations", Status.PASS),
        ("manifest-gpu-limits", Status.PASS),
        ("gpu-advertising", Status.PASS),
        ("autoscaler-health", Status.PASS),
        ("provisioning-time", Status.PASS),
        ("eks-node-template", Status.SKIP),
        ("permissions", Status.PASS),
    ]
    assert all(c.ok for c in checks) and checks[-2].message == (
        "not configured: pass --cloud eks --cluster NAME to check the node groups' ASG tags"
    )


def test_an_unreadable_cluster_stops_the_run_with_one_failure() -> None:
    checks = doctor.run_checks(Facts(cluster_error="listing nodes failed: connection refused"))
    assert [(c.name, c.status) for c in checks] == [("cluster", Status.FAIL), ("permissions", Status.WARN)]
    assert checks[0].message == "could not read the cluster: listing nodes failed: connection refused"


def test_no_gpu_pool_and_a_broken_profiles_file_fail() -> None:
    checks = doctor.run_checks(Facts(profiles_error="invalid GPU profiles:\n  profiles.t4: unknown field"))
    assert [(c.name, c.status) for c in checks][:2] == [
        ("profiles", Status.FAIL),
        ("pool-sizing", Status.FAIL),
    ]
    assert checks[1].message == (
        "no GPU pool found: no node looks like a GPU node and the autoscaler scales no pool at zero"
    )


# -- which pools are GPU pools -----------------------------------------------------------------------


def test_gpu_pools_are_those_with_gpu_nodes_and_autoscaled_pools_at_zero() -> None:
    cpu = Node("cpu-1", pool="default-pool", labels={"cloud.google.com/gke-nodepool": "default-pool"})
    found = assemble_pools([cpu, gpu_node()], {MIG: (0, 5)}, status_readable=True)
    assert [(p.name, p.min_size, p.max_size, p.autoscaled, p.cloud) for p in found] == [
        ("gpu-pool", 0, 5, True, GKE)
    ]
    at_zero = assemble_pools([cpu], {MIG: (0, 5)}, status_readable=True)
    assert [(p.name, p.nodes, p.cloud) for p in at_zero] == [("gpu-pool", (), GKE)]
    unscaled = assemble_pools([gpu_node()], {}, status_readable=True)
    assert [(p.name, p.autoscaled) for p in unscaled] == [("gpu-pool", False)]
    assert assemble_pools([gpu_node()], {}, status_readable=False)[0].autoscaled is None


def test_eks_groups_map_to_their_node_group_through_the_cloud() -> None:
    gpu = cloud_view(pools.Cloud.EKS, accelerator_count=None)
    cpu = cloud_view(
        pools.Cloud.EKS,
        name="cpu-ng",
        asg_name="eks-cpu-ng-asg",
        machine_type="m5.large",
        accelerator_type="",
        accelerator_count=None,
        ami_type="AL2023_x86_64_STANDARD",
        taints=(),
    )
    cloud = {"gpu-ng": gpu, "cpu-ng": cpu}
    groups = {"eks-gpu-ng-asg": (0, 4), "eks-cpu-ng-asg": (0, 3)}
    found = assemble_pools([], groups, status_readable=True, cloud=cloud)
    assert [(p.name, p.max_size, p.cloud, p.view) for p in found] == [("gpu-ng", 4, EKS, gpu)]
    named = assemble_pools([], groups, status_readable=True, cloud=cloud, only=frozenset({"cpu-ng"}))
    assert [p.name for p in named] == ["cpu-ng"]


def test_a_pool_asked_for_by_name_that_nothing_knows_fails_clearly() -> None:
    assert assemble_pools([gpu_node()], {}, status_readable=True, only=frozenset({"gpu-pol"})) == ()
    checks = doctor.run_checks(Facts(unknown_pools=("gpu-pol",), known_pools=("default-pool", "gpu-pool")))
    assert (checks[0].name, checks[0].status, checks[0].message) == (
        "pool-sizing",
        Status.FAIL,
        "no pool named gpu-pol; the cluster has default-pool, gpu-pool",
    )
