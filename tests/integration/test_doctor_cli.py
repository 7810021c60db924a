"""`gpubot doctor` in-process against the embedded cluster: healthy, then broken one way at a time.

Everything it talks to is real over loopback: the kubernetes client to the sim's API server, the
Container API client and boto3 to its GKE and EKS/Auto Scaling APIs, redis-py to a private Redis.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis
import urllib3
import yaml
from kubernetes import client

from bot import cli, cli_demo
from bot.adapters import store
from bot.core import provisioning
from sim import seed
from sim.cluster import autoscaler, world

CLEARED_ENV = (
    *cli_demo.LOOPBACK_UNSAFE_ENV,
    "GPUBOT_PROFILES_FILE",
    "GPUBOT_DEFAULT_PROFILE",
    "GPUBOT_NAMESPACE",
    "GPUBOT_KUBE_CONTEXT",
    "GPUBOT_IN_CLUSTER",
    "KUBERNETES_SERVICE_HOST",
    "GPUBOT_GKE_ENDPOINT",
    "GPUBOT_EKS_ENDPOINT",
    "GPUBOT_AUTOSCALING_ENDPOINT",
    "GPUBOT_REDIS_PREFIX",
)
GPU_UP_SECONDS = 250
"""Simulated seconds from a larger target size to an allocatable GPU: boot 90 + Ready 30 + plugin 120."""
WRONG_VALUE_PROFILES = """\
profiles:
  t4:
    tolerations:
      - {key: nvidia.com/gpu, operator: Equal, value: "true", effect: NoSchedule}
    nodeSelector: {app-type: gpu-workloads}
"""


def configure(
    sim: world.BackgroundWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    for name in CLEARED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("REDIS_URL", redis_url)


@pytest.fixture
def gke(
    sim: world.BackgroundWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> list[str]:
    """The seed's cluster, configured for doctor; the flags that let it read the GKE node pools."""
    configure(sim, tmp_path, monkeypatch, redis_url)
    return [
        "--cloud", "gke", "--cluster", world.CLUSTER, "--project", world.PROJECT,
        "--location", world.LOCATION, "--endpoint", sim.url,
    ]  # fmt: skip


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, list[str]]]:
    """Exit code, and each check's printed lines (verdict line, then its fix) by check name."""
    code = cli.main(["doctor", *args])
    by_name: dict[str, list[str]] = {}
    current: list[str] = []
    for line in capsys.readouterr().out.splitlines():
        verdict, _, rest = line.partition(" ")
        if verdict in ("PASS", "WARN", "FAIL", "SKIP"):
            current = by_name.setdefault(rest.split(":", 1)[0], [])
            current.append(line)
        elif line.startswith("  fix: "):
            current.append(line)
    return code, by_name


def verdicts(found: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        name: [line.split(" ", 1)[0] for line in lines if not line.startswith("  ")]
        for name, lines in found.items()
    }


def bring_up_a_gpu_node(sim: world.BackgroundWorld) -> None:
    sim.run(lambda: sim.world.registry.set_size("gpu-pool", 1))
    sim.advance(GPU_UP_SECONDS)
    assert any(n["status"].get("allocatable", {}).get("nvidia.com/gpu") == "1" for n in sim.nodes())


def test_a_healthy_cluster_passes_every_check(
    sim: world.BackgroundWorld,
    gke: list[str],
    redis_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bring_up_a_gpu_node(sim)
    with redis.Redis.from_url(redis_url) as connection:
        store.RedisStore(connection).add_sample(provisioning.series("gpu-pool"), 250.0, keep=20)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(seed.CORRECTED_MANIFEST)

    code, found = doctor(capsys, *gke, "--manifest", str(manifest))

    assert code == 0
    assert verdicts(found) == {
        "pool-sizing": ["PASS"],
        "pool-taint": ["PASS"],
        "profile-tolerations": ["PASS", "PASS"],  # t4 and notebook, both on gpu-pool
        "manifest-fields": ["PASS"],
        "manifest-tolerations": ["PASS"],
        "manifest-gpu-limits": ["PASS"],
        "gpu-advertising": ["PASS"],
        "autoscaler-health": ["PASS"],
        "provisioning-time": ["PASS"],
        "eks-node-template": ["SKIP"],
        "permissions": ["PASS"],
    }
    node = sim.nodes()[-1]["metadata"]["name"]
    assert found["pool-taint"] == [
        "PASS pool-taint: gpu-pool: all 1 node(s) carry nvidia.com/gpu=present:NoSchedule, so only pods that "
        "tolerate it land there"
    ]
    assert node.startswith("gke-demo-gpu-pool-")
    assert found["gpu-advertising"] == [
        "PASS gpu-advertising: gpu-pool: 1 Ready node(s) advertise 1 allocatable nvidia.com/gpu, so the "
        "device plugin runs"
    ]
    assert found["provisioning-time"] == [
        "PASS provisioning-time: gpu-pool: scale-ups take 4m10s to a usable GPU (median of 1, slowest "
        "4m10s), within 28% of the 15m max-node-provision-time"
    ]
    assert found["autoscaler-health"][0].startswith(
        "PASS autoscaler-health: kube-system/cluster-autoscaler-status: Healthy, updated "
    )
    assert found["eks-node-template"] == [
        "SKIP eks-node-template: the cluster is on GKE: node-template tags are an EKS matter"
    ]

    assert cli.main(["doctor", *gke, "--json"]) == 0
    listed: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert {c["name"] for c in listed} >= {"pool-sizing", "permissions"} and all(c["ok"] for c in listed)
    assert set(listed[0]) == {"name", "status", "ok", "message", "fix"}


def test_at_zero_nodes_what_cannot_be_seen_is_a_warning_not_a_pass(
    sim: world.BackgroundWorld,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(sim, tmp_path, monkeypatch, redis_url)
    code, found = doctor(capsys)
    assert code == 0
    assert {name for name, v in verdicts(found).items() if v == ["WARN"]} == {
        "pool-taint",
        "gpu-advertising",
        "provisioning-time",
    }
    assert found["pool-taint"][0] == (
        "WARN pool-taint: gpu-pool: unknown: the pool has no nodes and no cloud template was read, so "
        "whether new nodes get the nvidia.com/gpu=present:NoSchedule taint cannot be told"
    )
    assert found["gpu-advertising"] == [
        "WARN gpu-advertising: gpu-pool: no nodes, so whether the device plugin advertises nvidia.com/gpu "
        "cannot be checked",
        "  fix: check the template (gcloud container node-pools describe gpu-pool "
        "--format='value(config.accelerators)'), then run doctor again while a GPU workload keeps a node up",
    ]


def test_the_gke_template_answers_for_a_pool_at_zero(
    gke: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = doctor(capsys, *gke)
    assert code == 0
    assert found["pool-taint"] == [
        "PASS pool-taint: gpu-pool: no nodes now; the GKE node pool's config (gpu-pool) gives new nodes "
        "nvidia.com/gpu=present:NoSchedule"
    ]
    assert found["gpu-advertising"][0] == (
        "WARN gpu-advertising: gpu-pool: no nodes, so whether the device plugin advertises nvidia.com/gpu "
        "cannot be checked; the GKE node pool's config (gpu-pool) promises 1 GPU(s) per node"
    )


def test_a_pool_that_keeps_a_node_fails_sizing(
    sim: world.BackgroundWorld, gke: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    sim.run(lambda: sim.world.registry.set_autoscaling("gpu-pool", enabled=True, min_size=1, max_size=5))
    sim.advance(10)  # one autoscaler scan rewrites its status with the new range
    code, found = doctor(capsys, *gke)
    assert code == 1
    assert found["pool-sizing"] == [
        "FAIL pool-sizing: gpu-pool: min size is 1: that many GPU nodes run, and are billed, while nobody "
        "uses them; set --min 0 (a pre-warm schedule raises it only when wanted)",
        "  fix: gcloud container node-pools update gpu-pool --cluster demo --enable-autoscaling "
        "--min-nodes 0 --max-nodes 5",
    ]


def test_the_seed_manifests_typo_is_caught_before_any_api_server_sees_it(
    sim: world.BackgroundWorld, gke: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "gpu-pod.yaml"
    manifest.write_text(seed.SEED_MANIFEST)
    code, found = doctor(capsys, *gke, "--manifest", str(manifest))
    assert code == 1
    assert found["manifest-fields"][0] == (
        f'FAIL manifest-fields: {manifest}: spec.tolerations[0]: unknown field "important" — did you mean '
        '"key"?; spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is '
        'empty, which means "match all values and all keys"'
    )
    assert found["manifest-tolerations"][0].startswith(f"WARN manifest-tolerations: {manifest} (Pod gpu-pod)")
    assert sim.pods() == [], "nothing was sent to the API server"


def test_a_profile_with_the_wrong_toleration_value_is_only_saved_by_gkes_admission(
    gke: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(WRONG_VALUE_PROFILES)
    monkeypatch.setenv("GPUBOT_PROFILES_FILE", str(profiles))
    code, found = doctor(capsys, *gke)
    assert code == 0
    assert found["profile-tolerations"] == [
        "WARN profile-tolerations: profile t4 → gpu-pool: no toleration for "
        "nvidia.com/gpu=present:NoSchedule (gpu-pool's taints); its pods get on only because GKE's "
        "ExtendedResourceToleration admission adds one for pods that request nvidia.com/gpu, which other "
        "clusters (EKS) lack",
        "  fix: add to the tolerations in profiles.t4 of the profiles file (GPUBOT_PROFILES_FILE): "
        "{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}",
    ]


def test_an_rbac_denial_fails_permissions(
    sim: world.BackgroundWorld, gke: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for access in (
        {"verb": "create", "resource": "pods", "namespace": "gpubot-workloads"},
        {"verb": "watch", "resource": "nodes"},
    ):
        answer = urllib3.request(
            "POST", f"{sim.url}/simctl/v1/faults", json={"access": access, "kind": "deny"}
        )
        assert answer.status == 200
    code, found = doctor(capsys, *gke)
    assert code == 1
    assert found["permissions"] == [
        "FAIL permissions: denied: create pods in gpubot-workloads; watch nodes",
        "  fix: grant them in the Role and ClusterRole bound to gpubot's service account (the Helm chart's "
        "RBAC has exactly these), then check: kubectl auth can-i VERB RESOURCE -n NAMESPACE "
        "--as system:serviceaccount:NAMESPACE:gpubot",
    ]


def status_stamp(sim: world.BackgroundWorld, ago: timedelta) -> str:
    moment = sim.run(sim.world.clock.datetime) - ago
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f000 +0000 UTC")


def test_a_stale_unhealthy_or_missing_autoscaler_status_fails(
    sim: world.BackgroundWorld, gke: list[str], core: client.CoreV1Api, capsys: pytest.CaptureFixture[str]
) -> None:
    name, namespace = autoscaler.STATUS_NAME, autoscaler.STATUS_NAMESPACE
    stale = {"metadata": {"annotations": {autoscaler.LAST_UPDATED: status_stamp(sim, timedelta(minutes=10))}}}
    core.patch_namespaced_config_map(name, namespace, stale)
    code, found = doctor(capsys, *gke)
    assert code == 1
    assert found["autoscaler-health"][0] == (
        "FAIL autoscaler-health: kube-system/cluster-autoscaler-status: last updated 10m00s ago (over 2m; it "
        "is rewritten every scan, 10s by default): the autoscaler has stopped or is stuck"
    )

    current = core.read_namespaced_config_map(name, namespace)
    unhealthy = current.data["status"].replace("status: Healthy", "status: Unhealthy", 1)
    fresh = {autoscaler.LAST_UPDATED: status_stamp(sim, timedelta(0))}
    core.patch_namespaced_config_map(
        name, namespace, {"data": {"status": unhealthy}, "metadata": {"annotations": fresh}}
    )
    code, found = doctor(capsys, *gke)
    assert code == 1
    assert found["autoscaler-health"][0] == (
        "FAIL autoscaler-health: kube-system/cluster-autoscaler-status: cluster-wide health is Unhealthy; an "
        "unhealthy autoscaler stops scaling (too many unready nodes, or it cannot reach the cloud)"
    )

    core.delete_namespaced_config_map(name, namespace)
    code, found = doctor(capsys, *gke)
    assert code == 1
    assert found["autoscaler-health"][0] == (
        "FAIL autoscaler-health: no kube-system/cluster-autoscaler-status ConfigMap: the Cluster Autoscaler "
        "is not running, or writes no status"
    )
    assert found["pool-sizing"][0].startswith(
        "WARN pool-sizing: gpu-pool: the autoscaler's status gives no size"
    )


def aws(service: str, sim: world.BackgroundWorld) -> Any:
    return boto3.client(
        service,
        endpoint_url=sim.url,
        region_name=world.EKS_REGION,
        aws_access_key_id="emulator",
        aws_secret_access_key="emulator",
    )


def test_an_eks_node_group_without_template_tags_fails_until_tagged(
    sim_without_gpu_pool: world.BackgroundWorld,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = sim_without_gpu_pool
    configure(sim, tmp_path, monkeypatch, redis_url)
    aws("eks", sim).create_nodegroup(
        clusterName=world.CLUSTER,
        nodegroupName="gpu-ng",
        scalingConfig={"minSize": 0, "maxSize": 3, "desiredSize": 0},
        subnets=["subnet-1"],
        nodeRole="arn:aws:iam::123456789012:role/node",
        instanceTypes=["g4dn.xlarge"],
        amiType="AL2_x86_64_GPU",
        labels={"app-type": "gpu-workloads"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
    )
    sim.advance(10)
    flags = [
        "--cloud",
        "eks",
        "--cluster",
        world.CLUSTER,
        "--region",
        world.EKS_REGION,
        "--endpoint",
        sim.url,
    ]
    template = "k8s.io/cluster-autoscaler/node-template/"
    code, found = doctor(capsys, *flags)
    assert code == 1
    failed = found["eks-node-template"][0]
    assert failed.startswith("FAIL eks-node-template: gpu-ng: ASG eks-gpu-ng-asg lacks the tag ")
    assert [
        k for k in ("label/app-type", "taint/nvidia.com/gpu", "resources/nvidia.com/gpu") if k in failed
    ] == [
        "label/app-type",
        "taint/nvidia.com/gpu",
        "resources/nvidia.com/gpu",
    ]
    assert found["pool-sizing"] == [
        "PASS pool-sizing: gpu-ng: min 0, max 3: scales from zero up to 3 node(s)"
    ]

    tags = {
        f"{template}label/app-type": "gpu-workloads",
        f"{template}taint/nvidia.com/gpu": "present:NoSchedule",
        f"{template}resources/nvidia.com/gpu": "1",
    }
    aws("autoscaling", sim).create_or_update_tags(
        Tags=[
            {
                "ResourceId": "eks-gpu-ng-asg",
                "ResourceType": "auto-scaling-group",
                "Key": k,
                "Value": v,
                "PropagateAtLaunch": False,
            }
            for k, v in tags.items()
        ]
    )
    code, found = doctor(capsys, *flags)
    assert found["eks-node-template"] == [
        "PASS eks-node-template: gpu-ng: ASG eks-gpu-ng-asg has node-template tags for 1 label(s), "
        "1 taint(s) and nvidia.com/gpu=1, and both auto-discovery tags"
    ]
    assert code == 0, found

    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(WRONG_VALUE_PROFILES)
    monkeypatch.setenv("GPUBOT_PROFILES_FILE", str(profiles))
    code, found = doctor(capsys, *flags)
    assert code == 1
    assert found["profile-tolerations"][0] == (
        "FAIL profile-tolerations: profile t4 → gpu-ng: does not tolerate nvidia.com/gpu=present:NoSchedule "
        '(gpu-ng\'s taints), so its pods stay Pending ("untolerated taint") and trigger no scale-up'
    )


def test_bad_input_gets_a_friendly_refusal(gke: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--manifest", "/nonexistent/pod.yaml"]) == 2
    assert capsys.readouterr().err.startswith(
        "gpubot doctor: --manifest /nonexistent/pod.yaml: cannot read it"
    )
    assert cli.main(["doctor", "--cloud", "gke", "--cluster", "demo"]) == 2
    assert capsys.readouterr().err == "gpubot doctor: --cloud gke needs --project and --location as well\n"
