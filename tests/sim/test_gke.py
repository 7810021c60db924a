"""The simulated GKE API driven by the real google-cloud-container REST client and gcloud over loopback."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1

from sim.clock import Clock
from sim.cluster import gke
from sim.cluster.pools import EKS, GKE, NodePool, PoolRegistry, Taint
from tests.sim import routes_server

PARENT = "projects/demo/locations/local-a/clusters/demo"
POOL = f"{PARENT}/nodePools/gpu-pool"


@dataclass
class Server:
    url: str
    registry: PoolRegistry
    clock: Clock
    api: gke.GkeApi


@pytest.fixture
def server() -> Iterator[Server]:
    registry, clock = PoolRegistry(), Clock()
    api = gke.GkeApi(
        registry, project="demo", location="local-a", cluster="demo", clock=clock, node_counts=lambda _: 2
    )
    with routes_server.serve(api.routes()) as url:
        yield Server(url, registry, clock, api)


def client_for(server: Server) -> container_v1.ClusterManagerClient:
    return container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


def seed_pool() -> container_v1.NodePool:
    """The tutorial's pool: T4, autoscaling 0..5, the GPU taint (sent as enum 1) and a label."""
    return container_v1.NodePool(
        name="gpu-pool",
        config=container_v1.NodeConfig(
            machine_type="n1-standard-4",
            accelerators=[
                container_v1.AcceleratorConfig(accelerator_count=1, accelerator_type="nvidia-tesla-t4")
            ],
            taints=[
                container_v1.NodeTaint(
                    key="nvidia.com/gpu", value="present", effect=container_v1.NodeTaint.Effect.NO_SCHEDULE
                )
            ],
            labels={"app-type": "gpu-workloads"},
        ),
        autoscaling=container_v1.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=5),
    )


def test_python_client_pool_lifecycle(server: Server) -> None:
    client = client_for(server)
    operation = client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    assert operation.operation_type == container_v1.Operation.Type.CREATE_NODE_POOL
    done = client.get_operation(name=f"projects/demo/locations/local-a/operations/{operation.name}")
    assert done.status == container_v1.Operation.Status.DONE and not done.error.message

    pool = server.registry.get("gpu-pool")
    assert (pool.cloud, pool.machine_type, pool.accelerator_type, pool.accelerator_count) == (
        GKE,
        "n1-standard-4",
        "nvidia-tesla-t4",
        1,
    )
    assert (pool.autoscaling, pool.min_size, pool.max_size, pool.target_size) == (True, 0, 5, 0)
    assert pool.taints == [Taint("nvidia.com/gpu", "present", "NoSchedule")]
    assert pool.labels == {"app-type": "gpu-workloads"}

    fetched = client.get_node_pool(name=POOL)
    assert fetched.config.accelerators[0].accelerator_count == 1
    assert fetched.config.taints[0].effect == container_v1.NodeTaint.Effect.NO_SCHEDULE
    assert fetched.config.disk_size_gb == 100
    assert fetched.status == container_v1.NodePool.Status.RUNNING
    assert list(fetched.instance_group_urls) == [pool.group_id()]
    assert [p.name for p in client.list_node_pools(parent=PARENT).node_pools] == ["gpu-pool"]

    autoscaling = container_v1.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=3)
    client.set_node_pool_autoscaling(
        request=container_v1.SetNodePoolAutoscalingRequest(name=POOL, autoscaling=autoscaling)
    )
    assert (pool.min_size, pool.max_size, pool.target_size) == (1, 3, 1)

    client.set_node_pool_size(request={"name": POOL, "node_count": 0})  # the body is {}: zero is left out
    assert pool.target_size == 0

    update = container_v1.ClusterUpdate(
        desired_node_pool_id="gpu-pool",
        desired_node_pool_autoscaling=container_v1.NodePoolAutoscaling(enabled=False),
    )
    assert client.update_cluster(name=PARENT, update=update).operation_type == (
        container_v1.Operation.Type.UPDATE_CLUSTER
    )
    assert pool.autoscaling is False
    assert client.get_node_pool(name=POOL).autoscaling.enabled is False

    cluster = client.get_cluster(name=PARENT)
    assert [p.name for p in cluster.node_pools] == ["gpu-pool"]
    assert cluster.status == container_v1.Cluster.Status.RUNNING and cluster.current_node_count == 2

    client.delete_node_pool(name=POOL)
    assert server.registry.list() == []
    with pytest.raises(exceptions.NotFound, match="gpu-pool"):
        client.get_node_pool(name=POOL)


def test_update_node_pool_replaces_taints_and_labels(server: Server) -> None:
    client = client_for(server)
    client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    taint = container_v1.NodeTaint(
        key="dedicated", value="ml", effect=container_v1.NodeTaint.Effect.NO_EXECUTE
    )
    client.update_node_pool(
        request=container_v1.UpdateNodePoolRequest(
            name=POOL,
            taints=container_v1.NodeTaints(taints=[taint]),
            labels=container_v1.NodeLabels(labels={"team": "ml"}),
        )
    )
    pool = server.registry.get("gpu-pool")
    assert pool.taints == [Taint("dedicated", "ml", "NoExecute")]
    assert pool.labels == {"team": "ml"}
    assert client.get_node_pool(name=POOL).config.taints[0].key == "dedicated"


def test_errors_map_to_api_core_exceptions(server: Server) -> None:
    client = client_for(server)
    client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    with pytest.raises(exceptions.Conflict, match="Already exists"):
        client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name="projects/demo/locations/local-a/clusters/other")
    with pytest.raises(exceptions.NotFound):
        client.list_node_pools(parent="projects/other/locations/local-a/clusters/demo")
    with pytest.raises(exceptions.NotFound):
        client.get_operation(name="projects/demo/locations/local-a/operations/operation-1-ffffffff")
    bad_scaling = container_v1.NodePoolAutoscaling(enabled=True, min_node_count=4, max_node_count=2)
    with pytest.raises(exceptions.BadRequest, match="min_node_count"):
        client.set_node_pool_autoscaling(
            request=container_v1.SetNodePoolAutoscalingRequest(name=POOL, autoscaling=bad_scaling)
        )
    assert server.registry.get("gpu-pool").max_size == 5


@pytest.mark.parametrize(
    ("node_pool", "message"),
    [
        ({"name": "GPU_pool"}, "Name must start with a lowercase letter"),
        ({"name": "a" * 41}, "Name must start with a lowercase letter"),
        ({"name": "p", "autoscaling": {"enabled": True, "maxNodeCount": 0}}, "max_node_count"),
        (
            {"name": "p", "autoscaling": {"enabled": True, "minNodeCount": 3, "maxNodeCount": 2}},
            "min_node_count",
        ),
        ({"name": "p", "config": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}, "effect"),
        ({"name": "p", "config": {"taints": [{"key": "k", "effect": 7}]}}, "effect"),
        ({"name": "p", "initialNodeCount": "many"}, "initial_node_count"),
    ],
)
def test_create_rejects_invalid_pools(server: Server, node_pool: dict[str, Any], message: str) -> None:
    response = requests.post(f"{server.url}/v1/{PARENT}/nodePools", json={"nodePool": node_pool}, timeout=5)
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["status"]) == (400, 400, "INVALID_ARGUMENT")
    assert message in error["message"]
    assert server.registry.list() == []


def test_legacy_zone_paths_with_slash_verbs(server: Server) -> None:
    client = client_for(server)
    client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    legacy = {"project_id": "demo", "zone": "local-a", "cluster_id": "demo", "node_pool_id": "gpu-pool"}
    operation = client.set_node_pool_size(request=legacy | {"node_count": 4})
    assert server.registry.get("gpu-pool").target_size == 4
    assert client.get_node_pool(request=legacy).name == "gpu-pool"
    fetched = client.get_operation(
        request={"project_id": "demo", "zone": "local-a", "operation_id": operation.name}
    )
    assert fetched.status == container_v1.Operation.Status.DONE
    autoscaling = container_v1.NodePoolAutoscaling(enabled=True, min_node_count=2, max_node_count=6)
    client.set_node_pool_autoscaling(request=legacy | {"autoscaling": autoscaling})
    assert server.registry.get("gpu-pool").max_size == 6


def test_operations_run_for_the_configured_time_and_report_failures(server: Server) -> None:
    client = client_for(server)
    server.api.timings.gke_pool_create = 30
    operation = client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    name = f"projects/demo/locations/local-a/operations/{operation.name}"
    assert client.get_operation(name=name).status == container_v1.Operation.Status.RUNNING
    assert client.get_node_pool(name=POOL).status == container_v1.NodePool.Status.PROVISIONING
    assert not server.registry.get("gpu-pool").serving
    server.clock.advance(30)
    done = client.get_operation(name=name)
    assert done.status == container_v1.Operation.Status.DONE and done.end_time
    assert client.get_node_pool(name=POOL).status == container_v1.NodePool.Status.RUNNING

    server.api.fail_next_operation("Quota exceeded for quota metric 'GPUs'")
    failed = client.set_node_pool_size(request={"name": POOL, "node_count": 3})
    failed = client.get_operation(name=f"projects/demo/locations/local-a/operations/{failed.name}")
    assert (failed.error.code, failed.status_message) == (8, "Quota exceeded for quota metric 'GPUs'")
    assert server.registry.get("gpu-pool").target_size == 0
    listed = client.list_operations(parent="projects/demo/locations/-").operations
    assert [op.name for op in listed] == [operation.name, failed.name]


def test_updates_reconcile_and_deletes_stop_before_the_pool_is_gone(server: Server) -> None:
    client = client_for(server)
    client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    server.api.timings.gke_pool_update, server.api.timings.gke_pool_delete = 20, 60
    client.set_node_pool_size(request={"name": POOL, "node_count": 2})
    assert client.get_node_pool(name=POOL).status == container_v1.NodePool.Status.RECONCILING
    assert server.registry.get("gpu-pool").target_size == 2  # applied at once; only the Operation runs on
    server.clock.advance(20)
    assert client.get_node_pool(name=POOL).status == container_v1.NodePool.Status.RUNNING

    deleting = client.delete_node_pool(name=POOL)
    assert client.get_node_pool(name=POOL).status == container_v1.NodePool.Status.STOPPING
    server.clock.advance(59)
    assert server.registry.get("gpu-pool").status == "STOPPING"
    server.clock.advance(1)
    with pytest.raises(exceptions.NotFound):
        client.get_node_pool(name=POOL)
    done = client.get_operation(name=f"projects/demo/locations/local-a/operations/{deleting.name}")
    assert done.status == container_v1.Operation.Status.DONE


def test_one_operation_at_a_time(server: Server) -> None:
    client = client_for(server)
    server.api.timings.gke_pool_create = 30
    creating = client.create_node_pool(parent=PARENT, node_pool=seed_pool())
    with pytest.raises(exceptions.BadRequest) as refused:
        client.set_node_pool_size(request={"name": POOL, "node_count": 2})
    assert refused.value.response.json()["error"] == {
        "code": 400,
        "message": f"Cluster is running incompatible operation {creating.name}.",
        "status": "FAILED_PRECONDITION",
    }
    assert server.registry.get("gpu-pool").target_size == 0 and len(server.api.operations) == 1
    server.clock.advance(30)
    client.set_node_pool_size(request={"name": POOL, "node_count": 2})
    assert server.registry.get("gpu-pool").target_size == 2


@pytest.mark.parametrize(
    ("machine", "accelerator", "message"),
    [
        (
            "n1-standrd-4",
            "nvidia-tesla-t4",
            'Invalid machine type "n1-standrd-4" in zone "local-a": GCE_NOT_FOUND',
        ),
        ("e2-standard-4", "nvidia-tesla-t4", "[e2-standard-4, nvidia-tesla-t4] features are not compatible"),
        ("n1-standard-4", "nvidia-l4", "[n1-standard-4, nvidia-l4] features are not compatible"),
        (
            "n1-standard-8",
            "nvidia-tesla-a100",
            "[n1-standard-8, nvidia-tesla-a100] features are not compatible",
        ),
        (
            "a2-highgpu-1g",
            "nvidia-h100-80gb",
            "[a2-highgpu-1g, nvidia-h100-80gb] features are not compatible",
        ),
        (
            "n1-standard-4",
            "nvidia-tesla-k80",
            'Accelerator type "nvidia-tesla-k80" does not exist in zone local-a.',
        ),
        ("", "nvidia-tesla-t4", "Cannot use default machine type (e2-medium) with GPUs"),
    ],
)
def test_machine_types_and_accelerators_are_checked_as_gke_does(
    server: Server, machine: str, accelerator: str, message: str
) -> None:
    pool = seed_pool()
    pool.config.machine_type = machine
    pool.config.accelerators[0].accelerator_type = accelerator
    with pytest.raises(exceptions.BadRequest) as refused:
        client_for(server).create_node_pool(parent=PARENT, node_pool=pool)
    assert message in str(refused.value.message)
    assert server.registry.list() == [] and server.api.operations == {}


@pytest.mark.parametrize(
    ("machine", "accelerator"),
    [
        ("n1-standard-4", "nvidia-tesla-t4"),
        ("n1-highmem-8", "nvidia-tesla-v100"),
        ("g2-standard-8", "nvidia-l4"),
        ("a2-highgpu-1g", "nvidia-tesla-a100"),
        ("a2-ultragpu-1g", "nvidia-a100-80gb"),
        ("a3-highgpu-8g", "nvidia-h100-80gb"),
        ("n2-custom-4-8192", ""),
    ],
)
def test_machines_and_their_own_gpus_are_accepted(server: Server, machine: str, accelerator: str) -> None:
    pool = seed_pool()
    pool.config.machine_type = machine
    pool.config.accelerators[0].accelerator_type = accelerator
    if not accelerator:
        del pool.config.accelerators[:]
    client_for(server).create_node_pool(parent=PARENT, node_pool=pool)
    assert server.registry.get("gpu-pool").machine_type == machine


def test_only_gke_pools_are_visible(server: Server) -> None:
    server.registry.create(NodePool(name="eks-ng", cloud=EKS, machine_type="g4dn.xlarge"))
    server.registry.create(NodePool(name="l4", cloud=GKE, machine_type="g2-standard-4"))
    client = client_for(server)
    pools = client.list_node_pools(parent=PARENT).node_pools
    assert [p.name for p in pools] == ["l4"]
    # g2 machines come with their GPU, so GKE lists it although the pool was given no accelerator.
    assert pools[0].config.accelerators[0].accelerator_type == "nvidia-l4"
    with pytest.raises(exceptions.NotFound):
        client.get_node_pool(name=f"{PARENT}/nodePools/eks-ng")
    clusters = client.list_clusters(parent="projects/demo/locations/-").clusters
    assert [(c.name, c.location, c.current_master_version) for c in clusters] == [
        ("demo", "local-a", gke.MASTER_VERSION)
    ]


# -- gcloud, unmodified ---------------------------------------------------------------------------


def gcloud_config(directory: Path, url: str) -> dict[str, str]:
    """The same properties the reference sets with `gcloud config set`, written directly to save ~6 s."""
    (directory / "configurations").mkdir()
    (directory / "active_config").write_text("default")
    (directory / "configurations" / "config_default").write_text(
        "[auth]\ndisable_credentials = true\n"
        f"[api_endpoint_overrides]\ncontainer = {url}/\n"
        "[core]\nproject = demo\ndisable_prompts = true\ndisable_usage_reporting = true\n"
        "check_gce_metadata = false\n"
        "[component_manager]\ndisable_update_check = true\n"
        "[survey]\ndisable_prompts = true\n"
    )
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(directory), "CLOUDSDK_CONFIG": str(directory)}


def gcloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = ["gcloud", "container", *args, "--location", "local-a"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def node_pools(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return gcloud(env, "node-pools", *args, "--cluster", "demo")


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_tutorial_commands(server: Server, tmp_path: Path) -> None:
    env = gcloud_config(tmp_path, server.url)
    created = node_pools(
        env,
        *(
            "create",
            "gpu-pool",
            "--machine-type",
            "n1-standard-4",
            "--accelerator",
            "type=nvidia-tesla-t4,count=1",
        ),
        *("--enable-autoscaling", "--min-nodes", "0", "--max-nodes", "5", "--num-nodes", "0"),
        *("--node-taints", "nvidia.com/gpu=present:NoSchedule", "--node-labels", "app-type=gpu-workloads"),
    )
    assert created.returncode == 0, created.stderr
    assert "Created [" in created.stderr and "gpu-pool" in created.stdout
    pool = server.registry.get("gpu-pool")
    assert (pool.machine_type, pool.accelerator_type, pool.accelerator_count) == (
        "n1-standard-4",
        "nvidia-tesla-t4",
        1,
    )
    assert (pool.autoscaling, pool.min_size, pool.max_size, pool.target_size) == (True, 0, 5, 0)
    assert pool.taints == [Taint("nvidia.com/gpu", "present", "NoSchedule")]
    assert pool.labels == {"app-type": "gpu-workloads"}

    listed = node_pools(env, "list", "--format", "value(name,config.machineType)")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["gpu-pool", "n1-standard-4"]

    described = node_pools(env, "describe", "gpu-pool", "--format", "json")
    assert described.returncode == 0, described.stderr
    echoed = json.loads(described.stdout)
    assert echoed["config"]["taints"] == [
        {"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}
    ]
    assert echoed["config"]["oauthScopes"] == gke.DEFAULT_OAUTH_SCOPES
    assert echoed["autoscaling"] == {"enabled": True, "maxNodeCount": 5}

    server.registry.set_size("gpu-pool", 3)
    resized = gcloud(env, "clusters", "resize", "demo", "--node-pool", "gpu-pool", "--num-nodes", "0")
    assert resized.returncode == 0, resized.stderr
    assert pool.target_size == 0

    deleted = node_pools(env, "delete", "gpu-pool", "--quiet")
    assert deleted.returncode == 0, deleted.stderr
    assert server.registry.list() == []


def create_args(machine: str) -> list[str]:
    return ["create", "gpu-pool", "--machine-type", machine, "--accelerator", "type=nvidia-tesla-t4,count=1"]


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_refuses_a_typo_and_a_t4_on_e2(server: Server, tmp_path: Path) -> None:
    env = gcloud_config(tmp_path, server.url)
    typo = node_pools(env, *create_args("n1-standrd-4"))
    assert typo.returncode == 1
    refused = 'Invalid machine type "n1-standrd-4" in zone "local-a": GCE_NOT_FOUND'
    assert f"ResponseError: code=400, message={refused}" in typo.stderr
    e2 = node_pools(env, *create_args("e2-standard-4"))
    assert e2.returncode == 1
    assert "[e2-standard-4, nvidia-tesla-t4] features are not compatible for creating instance." in e2.stderr
    assert server.registry.list() == [] and server.api.operations == {}


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_waits_for_the_operation(server: Server, tmp_path: Path) -> None:
    """gcloud polls the RUNNING Operation every 5 s; the pool is PROVISIONING until it is DONE."""
    env = gcloud_config(tmp_path, server.url)
    server.api.timings.gke_pool_create = 120
    command = ["gcloud", "container", "node-pools", *create_args("n1-standard-4"), "--num-nodes", "0"]
    command += ["--cluster", "demo", "--location", "local-a"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not server.api.operations and process.poll() is None:
            process_wait(process, 0.1)
        assert process.poll() is None, process.communicate()
        assert server.registry.get("gpu-pool").status == "PROVISIONING"
        server.clock.advance(120)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "Creating node pool gpu-pool" in err and "Created [" in err and "gpu-pool" in out
    assert server.registry.get("gpu-pool").status == "RUNNING"


def process_wait(process: subprocess.Popen[str], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(seconds)
