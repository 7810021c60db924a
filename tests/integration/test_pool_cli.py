"""`gpubot pool` in-process against the sim's GKE, EKS and Auto Scaling APIs, through the real SDKs."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1
from kubernetes import client

from bot import cli
from sim.cluster import world

T4 = "nvidia-tesla-t4"
ROLE = "arn:aws:iam::123456789012:role/eks-node-role"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in t4 profile, and no cloud or cluster the developer's shell points at."""
    for name in (
        "KUBECONFIG",
        "GPUBOT_PROFILES_FILE",
        "GPUBOT_DEFAULT_PROFILE",
        "GPUBOT_GKE_ENDPOINT",
        "GPUBOT_EKS_ENDPOINT",
        "GPUBOT_AUTOSCALING_ENDPOINT",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(name, raising=False)


def gke(sim: world.BackgroundWorld, name: str = "gpu-pool") -> list[str]:
    where = ["--cloud", "gke", "--project", world.PROJECT, "--location", world.LOCATION]
    return [*where, "--cluster", world.CLUSTER, "--name", name, "--endpoint", sim.url]


def eks(sim: world.BackgroundWorld, name: str = "gpu-ng") -> list[str]:
    where = ["--cloud", "eks", "--region", world.EKS_REGION, "--cluster", world.CLUSTER]
    return [*where, "--name", name, "--endpoint", sim.url]


EKS_INPUTS = ["--node-role", ROLE, "--subnets", "subnet-0a1b,subnet-2c3d"]


def pool_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["pool", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def listed_problems(out: str) -> list[str]:
    return [line.strip() for line in out.split("problems:")[1].strip().splitlines()]


def pools_in(sim: world.BackgroundWorld) -> list[dict[str, Any]]:
    return sim.run(sim.world.registry.snapshot)


def test_gke_pool_lifecycle(sim_without_gpu_pool: world.BackgroundWorld, capsys: Any) -> None:
    sim, where = sim_without_gpu_pool, gke(sim_without_gpu_pool)
    code, out, _ = pool_cli(
        capsys, "create", *where, "--profile", "t4", "--max", "5", "--machine-type", "n1-standard-8"
    )
    assert code == 0 and "created gpu-pool for profile t4" in out
    pool = sim.run(lambda: sim.world.registry.get("gpu-pool"))
    assert (pool.machine_type, pool.accelerator, pool.gpus_per_node) == (
        "n1-standard-8",
        "nvidia-tesla-t4",
        1,
    )
    assert (pool.autoscaling, pool.min_size, pool.max_size, pool.target_size) == (True, 0, 5, 0)
    assert [vars(t) for t in pool.taints] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert pool.labels == {"app-type": "gpu-workloads"}
    driver = pool.extra["gke"]["config"]["accelerators"][0]["gpuDriverInstallationConfig"]
    assert driver == {"gpuDriverVersion": "DEFAULT"}

    code, out, _ = pool_cli(capsys, "show", *where)
    assert code == 0
    for line in (
        "autoscaling   on, min 0, max 5",
        "machine       n1-standard-8",
        "accelerator   1 x nvidia-tesla-t4 per node",
        "taints        nvidia.com/gpu=present:NoSchedule",
        "labels        app-type=gpu-workloads",
        "problems: none",
    ):
        assert line in out

    code, out, _ = pool_cli(capsys, "set", *where, "--min", "0", "--max", "8")
    assert code == 0 and "now scales between 0 and 8 nodes" in out
    assert sim.run(lambda: sim.world.registry.get("gpu-pool").max_size) == 8
    code, out, _ = pool_cli(capsys, "show", *where)
    assert "autoscaling   on, min 0, max 8" in out and "problems: none" in out

    code, out, _ = pool_cli(capsys, "delete", *where, "--yes")
    assert code == 0 and "deleted gpu-pool" in out
    assert [p["name"] for p in pools_in(sim)] == ["default-pool"]
    code, _, err = pool_cli(capsys, "show", *where)
    assert code == 2 and "there is no pool gpu-pool" in err


def test_eks_nodegroup_lifecycle(sim: world.BackgroundWorld, capsys: Any) -> None:
    where = eks(sim)
    code, out, _ = pool_cli(capsys, "create", *where, "--profile", "t4", "--max", "5", *EKS_INPUTS)
    assert code == 0 and "created gpu-ng" in out
    pool = sim.run(lambda: sim.world.registry.get("gpu-ng"))
    assert (pool.cloud, pool.machine_type, pool.min_size, pool.max_size) == ("eks", "g4dn.xlarge", 0, 5)
    assert pool.extra["eks"]["amiType"] == "AL2023_x86_64_NVIDIA"
    assert pool.extra["eks"]["subnets"] == ["subnet-0a1b", "subnet-2c3d"]
    tags = pool.extra["asgTags"]
    assert tags[TEMPLATE + "taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert tags[TEMPLATE + "label/app-type"] == "gpu-workloads"
    assert tags[TEMPLATE + "resources/nvidia.com/gpu"] == "1"
    assert tags["k8s.io/cluster-autoscaler/enabled"] and tags["k8s.io/cluster-autoscaler/demo"]

    code, out, _ = pool_cli(capsys, "show", *where)
    assert code == 0 and "current size  0 node(s)" in out and "ASG           eks-gpu-ng-asg" in out
    assert "problems: none" in out

    code, out, _ = pool_cli(capsys, "set", *where, "--min", "1", "--max", "3")
    assert code == 0
    assert sim.run(lambda: (pool.min_size, pool.max_size, pool.target_size)) == (1, 3, 1)
    assert "current size  1 node(s)" in out and "min size is 1" in out

    code, out, _ = pool_cli(capsys, "set", *where, "--min", "0")
    assert code == 0 and "problems: none" in out and "autoscaling   on, min 0, max 3" in out

    code, out, _ = pool_cli(capsys, "delete", *where, "--yes")
    assert code == 0
    assert "gpu-ng" not in [p["name"] for p in pools_in(sim)]


def test_the_seed_pool_shows_no_problems(sim: world.BackgroundWorld, capsys: Any) -> None:
    code, out, _ = pool_cli(capsys, "show", *gke(sim))
    assert code == 0 and "problems: none" in out and "accelerator   1 x nvidia-tesla-t4" in out


def gke_client(sim: world.BackgroundWorld) -> container_v1.ClusterManagerClient:
    return container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": sim.url}
    )


def test_a_gke_pool_made_by_hand_wrong_shows_its_problems(sim: world.BackgroundWorld, capsys: Any) -> None:
    parent = f"projects/{world.PROJECT}/locations/{world.LOCATION}/clusters/{world.CLUSTER}"
    wrong = container_v1.NodePool(
        name="by-hand",
        config=container_v1.NodeConfig(
            machine_type="n1-standard-4",
            accelerators=[container_v1.AcceleratorConfig(accelerator_count=1, accelerator_type=T4)],
        ),
        autoscaling=container_v1.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=3),
    )
    gke_client(sim).create_node_pool(parent=parent, node_pool=wrong)
    code, out, _ = pool_cli(capsys, "show", *gke(sim, "by-hand"))
    assert code == 0
    problems = listed_problems(out)
    assert len(problems) == 2
    assert problems[0].startswith("- min size is 1: that many GPU nodes run, and are billed")
    assert problems[1].startswith("- no nvidia.com/gpu taint: any pod may land on a GPU node")

    code, out, _ = pool_cli(capsys, "set", *gke(sim, "by-hand"), "--min", "0")
    assert code == 0 and "min size" not in out and "no nvidia.com/gpu taint" in out


def aws(sim: world.BackgroundWorld, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=sim.url,
        region_name=world.EKS_REGION,
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def test_an_eks_nodegroup_without_template_tags_shows_them_missing(
    sim: world.BackgroundWorld, capsys: Any
) -> None:
    aws(sim, "eks").create_nodegroup(
        clusterName=world.CLUSTER,
        nodegroupName="by-hand",
        scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": 0},
        subnets=["subnet-1"],
        nodeRole=ROLE,
        instanceTypes=["g4dn.xlarge"],
        amiType="AL2_x86_64_GPU",
        labels={"app-type": "gpu-workloads"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
    )
    code, out, _ = pool_cli(capsys, "show", *eks(sim, "by-hand"))
    assert code == 0
    problems = listed_problems(out)
    assert [p.split(":")[0] for p in problems] == [
        f"- ASG eks-by-hand-asg lacks the tag {TEMPLATE}label/app-type=gpu-workloads",
        f"- ASG eks-by-hand-asg lacks the tag {TEMPLATE}taint/nvidia.com/gpu=present",
        f"- ASG eks-by-hand-asg lacks the tag {TEMPLATE}resources/nvidia.com/gpu=1",
    ]

    group = "eks-by-hand-asg"
    template = {"label/app-type": "gpu-workloads", "taint/nvidia.com/gpu": "present:NoSchedule"}
    template["resources/nvidia.com/gpu"] = "1"
    aws(sim, "autoscaling").create_or_update_tags(
        Tags=[
            {"ResourceId": group, "ResourceType": "auto-scaling-group", "Key": TEMPLATE + k, "Value": v}
            for k, v in template.items()
        ]
    )
    code, out, _ = pool_cli(capsys, "show", *eks(sim, "by-hand"))
    assert code == 0 and "problems: none" in out


BAD_INPUT: list[tuple[Callable[[world.BackgroundWorld], list[str]], str]] = [
    (
        lambda s: ["create", *gke(s, "new-pool"), "--profile", "v100", "--max", "5"],
        "unknown profile 'v100'; known: notebook, t4",
    ),
    (lambda s: ["create", *gke(s, "new-pool"), "--max", "0"], "--max 0: a pool that may have no node"),
    (lambda s: ["create", *gke(s, "new-pool"), "--min", "3", "--max", "2"], "--min 3 is above --max 2"),
    (lambda s: ["create", *gke(s, "New_Pool"), "--max", "2"], "is not a GKE node pool name"),
    (lambda s: ["create", *gke(s), "--max", "2"], "gpu-pool already exists in projects/demo/"),
    (
        lambda s: ["create", *gke(s, "l4"), "--max", "2", "--machine-type", "g2-standard-4"],
        "comes with nvidia-l4",
    ),
    (lambda s: ["create", *eks(s), "--max", "2", "--node-role", "node"], "IAM role ARN"),
    (lambda s: ["create", *eks(s), "--max", "2", "--node-role", ROLE], "EKS needs subnet ids"),
    (lambda s: ["set", *gke(s), "--min", "6"], "--min 6 is above --max 5"),
    (lambda s: ["set", *gke(s)], "give --min, --max or both"),
    (lambda s: ["set", *gke(s, "missing"), "--max", "3"], "there is no pool missing"),
    (lambda s: ["set", *eks(s, "missing"), "--max", "3"], "there is no pool missing in EKS cluster demo"),
    (lambda s: ["delete", *gke(s, "missing"), "--yes"], "there is no pool missing"),
    (lambda s: ["delete", *gke(s)], "deleting gpu-pool needs --yes"),
    (
        lambda s: ["show", "--cloud", "gke", "--cluster", "demo", "--endpoint", s.url],
        "needs --project and --location",
    ),
    (lambda s: ["show", *gke(s), "--endpoint", "localhost:1"], "expected an http(s) URL"),
]


@pytest.mark.parametrize(("argv", "says"), BAD_INPUT, ids=[says for _, says in BAD_INPUT])
def test_bad_input_is_refused_and_changes_nothing(
    sim: world.BackgroundWorld, capsys: Any, argv: Callable[[world.BackgroundWorld], list[str]], says: str
) -> None:
    before = pools_in(sim)
    code, out, err = pool_cli(capsys, *argv(sim))
    assert code == 2 and says in err and out == ""
    assert pools_in(sim) == before


def test_a_number_that_is_not_one_is_refused_by_the_parser(sim: world.BackgroundWorld, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["pool", "create", *gke(sim, "new-pool"), "--max", "five"])
    assert exited.value.code == 2
    assert "argument --max: expected a whole number, got 'five'" in capsys.readouterr().err
    assert [p["name"] for p in pools_in(sim)] == ["default-pool", "gpu-pool"]


def gpu_pod(name: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "nvidia/cuda:12.2.0-base-ubuntu22.04",
        "command": ["sleep", "3600"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    spec = {
        "containers": [container],
        "nodeSelector": {"app-type": "gpu-workloads"},
        "tolerations": [GPU_TOLERATION],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("cloud", ["gke", "eks"])
def test_a_created_pool_scales_from_zero_for_a_tolerating_pod(
    sim_without_gpu_pool: world.BackgroundWorld, capsys: Any, tmp_path: Path, cloud: str
) -> None:
    sim = sim_without_gpu_pool
    where = gke(sim) if cloud == "gke" else [*eks(sim, "gpu-pool"), *EKS_INPUTS]
    code, _, _ = pool_cli(capsys, "create", *where, "--profile", "t4", "--max", "2")
    assert code == 0
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", gpu_pod("train"))

        def phase() -> str:
            return str(core.read_namespaced_pod("train", "default").status.phase)

        for _ in range(90):
            if phase() == "Running":
                break
            sim.advance(10)
        assert phase() == "Running"
        node = core.read_namespaced_pod("train", "default").spec.node_name
        node_labels = core.read_node(node).metadata.labels
    pool_label = "cloud.google.com/gke-nodepool" if cloud == "gke" else "eks.amazonaws.com/nodegroup"
    assert node_labels[pool_label] == "gpu-pool"

    kubeconfig = tmp_path / "kubeconfig"
    world.write_kubeconfig(kubeconfig, sim.url)
    show = gke(sim) if cloud == "gke" else eks(sim, "gpu-pool")
    code, out, _ = pool_cli(capsys, "show", *show, "--kubeconfig", str(kubeconfig))
    expected = "1 node(s) in Kubernetes" if cloud == "gke" else "1 node(s)"
    assert code == 0 and f"current size  {expected}" in out and "problems: none" in out


@pytest.mark.parametrize("cloud", ["gke", "eks"])
def test_an_unreachable_cloud_fails_with_exit_1(capsys: Any, cloud: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        where = ["--project", "p", "--location", "l"] if cloud == "gke" else ["--region", "r"]
        code, out, err = pool_cli(
            capsys, "show", "--cloud", cloud, *where, "--cluster", "c", "--endpoint", url
        )
    assert code == 1 and out == ""
    assert "gpubot pool: Unavailable: cannot reach" in err


def test_the_endpoint_may_come_from_the_environment(
    sim: world.BackgroundWorld, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = ["--cloud", "gke", "--project", world.PROJECT, "--location", world.LOCATION, "--cluster", "demo"]
    monkeypatch.setenv("GPUBOT_GKE_ENDPOINT", sim.url)
    code, out, _ = pool_cli(capsys, "show", *where)
    assert code == 0 and "problems: none" in out
    monkeypatch.setenv("GPUBOT_GKE_ENDPOINT", "127.0.0.1:6443")
    code, _, err = pool_cli(capsys, "show", *where)
    assert code == 2 and "GPUBOT_GKE_ENDPOINT='127.0.0.1:6443': expected an http(s) URL" in err
