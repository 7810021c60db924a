"""Cloud operations take time in the default world: a GKE pool gets no node before it is RUNNING, and a
pool being deleted loses its nodes before it is gone; a restart finishes what was under way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1
from kubernetes import client

from sim import seed
from sim.cluster import config, world

PARENT = f"projects/{world.PROJECT}/locations/{world.LOCATION}/clusters/{world.CLUSTER}"
POOL = f"{PARENT}/nodePools/gpu-pool"


@pytest.fixture
def realistic() -> Iterator[world.BackgroundWorld]:
    with world.BackgroundWorld(world.WorldConfig(gpu_pool=False)) as running:
        yield running


def gke_client(sim: world.BackgroundWorld) -> container_v1.ClusterManagerClient:
    return container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": sim.url}
    )


def seed_pool() -> container_v1.NodePool:
    return container_v1.NodePool(
        name="gpu-pool",
        config=container_v1.NodeConfig(
            machine_type="n1-standard-4",
            accelerators=[
                container_v1.AcceleratorConfig(accelerator_count=1, accelerator_type="nvidia-tesla-t4")
            ],
            labels={"app-type": "gpu-workloads"},
            taints=[container_v1.NodeTaint(key="nvidia.com/gpu", value="present", effect=1)],
        ),
        autoscaling=container_v1.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=5),
    )


def gpu_nodes(sim: world.BackgroundWorld) -> list[str]:
    return [n["metadata"]["name"] for n in sim.nodes() if "gpu-pool" in n["metadata"]["name"]]


def test_the_default_world_takes_its_time(realistic: world.BackgroundWorld) -> None:
    timings = config.Timings()
    assert all(getattr(timings, name) > 0 for name in config.CLOUD_OPERATIONS)
    assert realistic.world.gke.timings is realistic.world.timings


def test_no_node_before_the_pool_is_running(realistic: world.BackgroundWorld) -> None:
    sim, gke = realistic, gke_client(realistic)
    operation = gke.create_node_pool(parent=PARENT, node_pool=seed_pool())
    status, _ = seed.post_pod(sim.url, seed.seed_pod(), strict=True)
    assert status == 201
    create_time = sim.world.timings.gke_pool_create
    sim.advance(create_time - 1, step=5)
    assert gke.get_node_pool(name=POOL).status == container_v1.NodePool.Status.PROVISIONING
    assert sim.run(lambda: sim.world.registry.get("gpu-pool").target_size) == 0
    assert gpu_nodes(sim) == []
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        reasons = [e.reason for e in client.CoreV1Api(api).list_namespaced_event("default").items]
    assert "TriggeredScaleUp" not in reasons

    sim.advance(1)
    name = f"projects/{world.PROJECT}/locations/{world.LOCATION}/operations/{operation.name}"
    assert gke.get_operation(name=name).status == container_v1.Operation.Status.DONE
    assert gke.get_node_pool(name=POOL).status == container_v1.NodePool.Status.RUNNING
    sim.advance(sim.world.timings.scan_interval + sim.world.timings.provision_delay + 1)
    assert len(gpu_nodes(sim)) == 1


def test_a_pool_being_deleted_loses_its_nodes_then_is_gone(realistic: world.BackgroundWorld) -> None:
    sim, gke = realistic, gke_client(realistic)
    sim.run(lambda: setattr(sim.world.timings, "gke_pool_create", 0.0))
    gke.create_node_pool(parent=PARENT, node_pool=seed_pool())
    gke.set_node_pool_size(request={"name": POOL, "node_count": 1})
    sim.advance(sim.world.timings.provision_delay + 1)
    assert len(gpu_nodes(sim)) == 1

    gke.delete_node_pool(name=POOL)
    sim.advance(5)
    assert gke.get_node_pool(name=POOL).status == container_v1.NodePool.Status.STOPPING
    assert gpu_nodes(sim) == []
    sim.advance(sim.world.timings.gke_pool_delete)
    assert sim.run(lambda: [p.name for p in sim.world.registry.list()]) == ["default-pool"]


def test_a_restart_finishes_a_creation_under_way(tmp_path: Path) -> None:
    with world.BackgroundWorld(world.WorldConfig(gpu_pool=False, state_dir=tmp_path)) as first:
        gke_client(first).create_node_pool(parent=PARENT, node_pool=seed_pool())
        first.advance(30)
    with world.BackgroundWorld(world.WorldConfig(gpu_pool=False, state_dir=tmp_path)) as second:
        assert second.run(lambda: second.world.registry.get("gpu-pool").status) == "PROVISIONING"
        second.advance(second.world.timings.gke_pool_create - 30)
        assert second.run(lambda: second.world.registry.get("gpu-pool").status) == "RUNNING"
