"""The GPU pool rules as tables: the pool a profile gets, refusals, resizes, and what is wrong with a pool."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bot.core import models, pools, taints

GKE, EKS = pools.Cloud.GKE, pools.Cloud.EKS
GPU_TOLERATION = models.Toleration(key="nvidia.com/gpu", value="present", effect="NoSchedule")
T4 = models.GpuProfile(
    name="t4",
    accelerator="nvidia-tesla-t4",
    tolerations=(GPU_TOLERATION,),
    node_selector=(("app-type", "gpu-workloads"),),
)
A100 = dataclasses.replace(
    T4,
    name="a100",
    accelerator="nvidia-tesla-a100",
    node_selector=(("cloud.google.com/gke-accelerator", "nvidia-tesla-a100"),),
)
ROLE = "arn:aws:iam::123456789012:role/eks-node-role"


def request(cloud: pools.Cloud = GKE, **changes: Any) -> pools.PoolRequest:
    eks = {"node_role": ROLE, "subnets": ("subnet-0a1b",)} if cloud is EKS else {}
    fields: dict[str, Any] = {"name": "gpu-pool", "cluster": "prod", "profile": T4, "max_size": 5} | eks
    return pools.PoolRequest(cloud=cloud, **(fields | changes))


def planned(cloud: pools.Cloud = GKE, **changes: Any) -> pools.PoolSpec:
    spec = pools.plan_pool(request(cloud, **changes))
    assert isinstance(spec, pools.PoolSpec), spec
    return spec


def test_gke_pool_for_the_t4_profile_is_the_seed_pool() -> None:
    spec = planned()
    assert (spec.machine_type, spec.accelerator_type, spec.accelerator_count) == (
        "n1-standard-4",
        "nvidia-tesla-t4",
        1,
    )
    assert (spec.min_size, spec.max_size) == (0, 5)
    assert spec.taints == (taints.Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert spec.labels == {"app-type": "gpu-workloads"}
    assert spec.asg_tags == {} and spec.ami_type == ""


def test_eks_nodegroup_carries_the_tags_the_autoscaler_reads_at_zero() -> None:
    spec = planned(EKS, name="gpu-ng")
    assert (spec.machine_type, spec.accelerator_count, spec.ami_type) == (
        "g4dn.xlarge",
        1,
        "AL2023_x86_64_NVIDIA",
    )
    assert spec.labels == {"app-type": "gpu-workloads", "k8s.amazonaws.com/accelerator": "nvidia-tesla-t4"}
    assert spec.asg_tags == {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/prod": "owned",
        "k8s.io/cluster-autoscaler/node-template/label/app-type": "gpu-workloads",
        "k8s.io/cluster-autoscaler/node-template/label/k8s.amazonaws.com/accelerator": "nvidia-tesla-t4",
        "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "present:NoSchedule",
        "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1",
    }
    assert (spec.node_role, spec.subnets) == (ROLE, ("subnet-0a1b",))


@pytest.mark.parametrize(
    ("cloud", "changes", "machine", "gpus"),
    [
        (GKE, {"machine_type": "n1-standard-8"}, "n1-standard-8", 1),
        (GKE, {"machine_type": "n1-standard-16", "gpus_per_node": 4}, "n1-standard-16", 4),
        (GKE, {"profile": A100}, "a2-highgpu-1g", 1),
        (GKE, {"profile": A100, "machine_type": "a2-highgpu-4g"}, "a2-highgpu-4g", 4),
        (EKS, {"machine_type": "g4dn.12xlarge"}, "g4dn.12xlarge", 4),
        (EKS, {"profile": A100}, "p4d.24xlarge", 8),
        (EKS, {"machine_type": "g4dn.future", "gpus_per_node": 2}, "g4dn.future", 2),  # unknown to gpubot
    ],
)
def test_machine_and_gpus_per_node(
    cloud: pools.Cloud, changes: dict[str, Any], machine: str, gpus: int
) -> None:
    spec = planned(cloud, **changes)
    assert (spec.machine_type, spec.accelerator_count) == (machine, gpus)


def test_labels_the_cloud_sets_are_left_to_it() -> None:
    assert planned(profile=A100).labels == {}  # GKE labels A100 nodes with gke-accelerator itself
    eks = planned(EKS, profile=A100).labels
    assert eks["k8s.amazonaws.com/accelerator"] == "nvidia-tesla-a100"


@pytest.mark.parametrize(
    ("cloud", "changes", "says"),
    [
        (GKE, {"max_size": 0}, "never scales up"),
        (GKE, {"min_size": -1}, "fewer than 0"),
        (GKE, {"min_size": 3, "max_size": 2}, "--min 3 is above --max 2"),
        (GKE, {"max_size": 1001}, "at most 1000"),
        (EKS, {"max_size": 451}, "at most 450"),
        (GKE, {"name": "GPU_pool"}, "is not a GKE node pool name"),
        (EKS, {"name": "-gpu"}, "is not an EKS nodegroup name"),
        (EKS, {"node_role": "eks-node-role"}, "IAM role ARN"),
        (EKS, {"subnets": ()}, "subnet ids"),
        (EKS, {"subnets": ("sn-1",)}, "subnet ids"),
        (GKE, {"profile": dataclasses.replace(T4, accelerator="")}, "names no accelerator"),
        (GKE, {"profile": dataclasses.replace(T4, tolerations=())}, "does not tolerate"),
        (
            GKE,
            {
                "profile": dataclasses.replace(
                    T4, tolerations=(dataclasses.replace(GPU_TOLERATION, effect="NoExecute"),)
                )
            },
            "does not tolerate",
        ),
        (GKE, {"profile": dataclasses.replace(T4, accelerator="nvidia-tesla-k80")}, "pass --machine-type"),
        (GKE, {"machine_type": "g2-standard-4"}, "comes with nvidia-l4"),
        (GKE, {"profile": A100, "gpus_per_node": 2}, "comes with 1 GPU(s) per node, not 2"),
        (GKE, {"profile": dataclasses.replace(T4, max_count=2), "gpus_per_node": 1}, "would never fit"),
        (GKE, {"profile": dataclasses.replace(A100, max_count=2)}, "a node of a2-highgpu-1g has 1"),
        (
            GKE,
            {"profile": dataclasses.replace(A100, accelerator="nvidia-tesla-t4")},
            "selects cloud.google.com/gke-accelerator=nvidia-tesla-a100",
        ),
    ],
)
def test_refusals(cloud: pools.Cloud, changes: dict[str, Any], says: str) -> None:
    refused = pools.plan_pool(request(cloud, **changes))
    assert isinstance(refused, pools.Refused)
    assert says in refused.reason


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        (GPU_TOLERATION, True),
        (models.Toleration(key="nvidia.com/gpu", operator="Exists"), True),
        (models.Toleration(key="", operator="Exists"), True),
        (models.Toleration(key="nvidia.com/gpu", value="present"), True),  # empty effect: every effect
        (models.Toleration(key="nvidia.com/gpu", value="true", effect="NoSchedule"), False),
        (models.Toleration(key="gpu", value="present", effect="NoSchedule"), False),
        (models.Toleration(key="nvidia.com/gpu", operator="Exists", effect="PreferNoSchedule"), False),
    ],
)
def test_tolerates(toleration: models.Toleration, tolerated: bool) -> None:
    assert taints.tolerates(toleration, pools.GPU_TAINT) is tolerated


def view(cloud: pools.Cloud = GKE, **changes: Any) -> pools.PoolView:
    fields: dict[str, Any] = {
        "name": "gpu-pool",
        "cluster": "prod",
        "status": "RUNNING",
        "autoscaling": True,
        "min_size": 0,
        "max_size": 5,
        "current_size": None,
        "machine_type": "n1-standard-4",
        "accelerator_type": "nvidia-tesla-t4",
        "accelerator_count": 1,
        "labels": {"app-type": "gpu-workloads"},
        "taints": (pools.GPU_TAINT,),
    }
    if cloud is EKS:
        spec = planned(EKS)
        fields |= {
            "status": "ACTIVE",
            "current_size": 0,
            "machine_type": "g4dn.xlarge",
            "labels": spec.labels,
            "ami_type": spec.ami_type,
            "asg_name": "eks-gpu-pool-asg",
            "asg_tags": spec.asg_tags,
        }
    return pools.PoolView(cloud=cloud, **(fields | changes))


def test_a_pool_made_by_gpubot_has_no_problems() -> None:
    assert pools.problems(view()) == []
    assert pools.problems(view(EKS)) == []


TAG = "k8s.io/cluster-autoscaler/"


def without(tags: dict[str, str], *keys: str) -> dict[str, str]:
    return {k: v for k, v in tags.items() if k not in keys}


@pytest.mark.parametrize(
    ("cloud", "changes", "says"),
    [
        (GKE, {"min_size": 1}, ["min size is 1"]),
        (GKE, {"max_size": 0}, ["max size is 0"]),
        (GKE, {"autoscaling": False, "min_size": 0, "max_size": 0}, ["autoscaling is off", "max size is 0"]),
        (GKE, {"taints": ()}, ["no nvidia.com/gpu taint"]),
        (GKE, {"taints": (taints.Taint("dedicated", "ml", "NoSchedule"),)}, ["no nvidia.com/gpu taint"]),
        (
            GKE,
            {"taints": (taints.Taint("nvidia.com/gpu", "present", "PreferNoSchedule"),)},
            ["effect PreferNoSchedule"],
        ),
        (
            GKE,
            {"accelerator_type": "", "accelerator_count": 0, "machine_type": "e2-standard-4"},
            ["no GPU accelerator on e2-standard-4"],
        ),
        (GKE, {"status": "ERROR"}, ["status is ERROR"]),
        (EKS, {"ami_type": "AL2_x86_64"}, ["AMI type AL2_x86_64 has no NVIDIA driver"]),
        (EKS, {"asg_name": ""}, ["no Auto Scaling group yet"]),
        (
            EKS,
            {"asg_tags": {}},
            [f"lacks the tag {TAG}enabled", f"lacks the tag {TAG}prod"] + ["lacks the tag"] * 4,
        ),
        (
            EKS,
            {"asg_tags": without(planned(EKS).asg_tags, f"{TAG}node-template/taint/nvidia.com/gpu")},
            [f"lacks the tag {TAG}node-template/taint/nvidia.com/gpu=present:NoSchedule: at zero nodes"],
        ),
        (
            EKS,
            {"asg_tags": planned(EKS).asg_tags | {f"{TAG}node-template/resources/nvidia.com/gpu": "4"}},
            [f"tags {TAG}node-template/resources/nvidia.com/gpu=4, not 1"],
        ),
        (
            EKS,
            {"asg_tags": without(planned(EKS).asg_tags, f"{TAG}node-template/label/app-type")},
            ["label/app-type=gpu-workloads: at zero nodes the Cluster Autoscaler does not know"],
        ),
        (
            EKS,
            {
                "machine_type": "g9.mystery",
                "accelerator_count": None,
                "asg_tags": without(planned(EKS).asg_tags, f"{TAG}node-template/resources/nvidia.com/gpu"),
            },
            ["resources/nvidia.com/gpu=<GPUs per node>"],
        ),
    ],
)
def test_problems(cloud: pools.Cloud, changes: dict[str, Any], says: list[str]) -> None:
    found = pools.problems(view(cloud, **changes))
    assert len(found) == len(says), found
    for problem, expected in zip(found, says, strict=True):
        assert expected in problem


@pytest.mark.parametrize(
    ("current", "asked", "result"),
    [
        (None, {"min_size": 0, "max_size": 8}, pools.Resize(0, 8, None)),
        (None, {"max_size": 3}, pools.Resize(0, 3, None)),
        (2, {"min_size": 1}, pools.Resize(1, 5, None)),
        (0, {"min_size": 1}, pools.Resize(1, 5, 1)),  # EKS refuses a desired size below the min
        (4, {"max_size": 2}, pools.Resize(0, 2, 2)),
    ],
)
def test_resize(current: int | None, asked: dict[str, int], result: pools.Resize) -> None:
    asked = {"min_size": None, "max_size": None} | asked
    assert pools.plan_resize(view(current_size=current), **asked) == result


@pytest.mark.parametrize(
    ("asked", "says"),
    [
        ({}, "give --min, --max or both"),
        ({"min_size": 6}, "--min 6 is above --max 5"),
        ({"max_size": 0}, "never scales up"),
    ],
)
def test_resize_refusals(asked: dict[str, int], says: str) -> None:
    refused = pools.plan_resize(view(), **({"min_size": None, "max_size": None} | asked))
    assert isinstance(refused, pools.Refused) and says in refused.reason
