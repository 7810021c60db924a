"""The simulated EKS nodegroup API driven by the real boto3 client and its waiters over loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.exceptions
import pytest

from sim.clock import Clock
from sim.cluster import eks
from sim.cluster.pools import EKS, GKE, NodePool, PoolRegistry, Taint
from tests.sim import routes_server

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


@dataclass
class Server:
    url: str
    registry: PoolRegistry
    clock: Clock
    api: eks.EksApi


@pytest.fixture
def server() -> Iterator[Server]:
    registry, clock = PoolRegistry(), Clock()
    api = eks.EksApi(registry, cluster="demo", region="us-east-1", clock=clock)
    with routes_server.serve(api.routes()) as url:
        yield Server(url, registry, clock, api)


@pytest.fixture
def client(server: Server) -> Any:
    return boto3.client(
        "eks",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def create_gpu_nodegroup(client: Any, **overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "clusterName": "demo",
        "nodegroupName": "gpu-ng",
        "scalingConfig": {"minSize": 0, "maxSize": 5, "desiredSize": 0},
        "subnets": ["subnet-1"],
        "nodeRole": "arn:aws:iam::123456789012:role/node",
        "instanceTypes": ["g4dn.xlarge"],
        "amiType": "AL2_x86_64_GPU",
        "labels": {"app-type": "gpu-workloads"},
        "taints": [GPU_TAINT],
        "tags": {"team": "ml"},
    }
    nodegroup: dict[str, Any] = client.create_nodegroup(**(request | overrides))["nodegroup"]
    return nodegroup


def test_nodegroup_lifecycle(server: Server, client: Any) -> None:
    created = create_gpu_nodegroup(client)
    assert created["status"] == "ACTIVE" and created["capacityType"] == "ON_DEMAND"
    pool = server.registry.get("gpu-ng")
    assert (pool.cloud, pool.machine_type, pool.accelerator, pool.gpus_per_node) == (
        EKS,
        "g4dn.xlarge",
        "nvidia-tesla-t4",
        1,
    )
    assert (pool.autoscaling, pool.min_size, pool.max_size, pool.target_size) == (True, 0, 5, 0)
    assert pool.taints == [Taint("nvidia.com/gpu", "present", "NoSchedule")]
    assert pool.extra["asgTags"] == {
        "eks:cluster-name": "demo",
        "eks:nodegroup-name": "gpu-ng",
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/demo": "owned",
    }

    client.get_waiter("nodegroup_active").wait(
        clusterName="demo", nodegroupName="gpu-ng", WaiterConfig={"Delay": 1, "MaxAttempts": 2}
    )
    described = client.describe_nodegroup(clusterName="demo", nodegroupName="gpu-ng")["nodegroup"]
    assert described["resources"]["autoScalingGroups"] == [{"name": pool.group_id()}]
    assert described["taints"] == [GPU_TAINT] and described["tags"] == {"team": "ml"}
    assert described["health"] == {"issues": []} and described["nodegroupArn"].startswith(
        "arn:aws:eks:us-east-1:"
    )
    assert described["createdAt"].year == 2026
    assert client.list_nodegroups(clusterName="demo")["nodegroups"] == ["gpu-ng"]

    deleted = client.delete_nodegroup(clusterName="demo", nodegroupName="gpu-ng")["nodegroup"]
    assert deleted["status"] == "DELETING"
    client.get_waiter("nodegroup_deleted").wait(
        clusterName="demo", nodegroupName="gpu-ng", WaiterConfig={"Delay": 1, "MaxAttempts": 2}
    )
    assert server.registry.list() == []


def test_update_nodegroup_config(server: Server, client: Any) -> None:
    create_gpu_nodegroup(client, labels={"app-type": "gpu-workloads", "old": "x"})
    update = client.update_nodegroup_config(
        clusterName="demo",
        nodegroupName="gpu-ng",
        scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 2},
        labels={"addOrUpdateLabels": {"team": "ml"}, "removeLabels": ["old"]},
        taints={
            "addOrUpdateTaints": [{"key": "dedicated", "value": "ml", "effect": "NO_EXECUTE"}],
            "removeTaints": [{"key": "nvidia.com/gpu"}],
        },
    )["update"]
    assert (update["status"], update["type"]) == ("Successful", "ConfigUpdate")
    assert {"type": "DesiredSize", "value": "2"} in update["params"]
    pool = server.registry.get("gpu-ng")
    assert (pool.min_size, pool.max_size, pool.target_size) == (1, 3, 2)
    assert pool.labels == {"app-type": "gpu-workloads", "team": "ml"}
    assert pool.taints == [Taint("dedicated", "ml", "NoExecute")]

    described = client.describe_update(name="demo", updateId=update["id"], nodegroupName="gpu-ng")["update"]
    assert described["id"] == update["id"] and described["status"] == "Successful"
    assert client.list_updates(name="demo", nodegroupName="gpu-ng")["updateIds"] == [update["id"]]

    client.update_nodegroup_config(clusterName="demo", nodegroupName="gpu-ng", scalingConfig={"minSize": 0})
    assert (pool.min_size, pool.max_size, pool.target_size) == (0, 3, 2)


def test_status_follows_the_transition_times(server: Server, client: Any) -> None:
    server.api.timings.eks_nodegroup_create = 180
    server.api.timings.eks_nodegroup_update = 60
    server.api.timings.eks_nodegroup_delete = 120
    assert create_gpu_nodegroup(client)["status"] == "CREATING"
    assert not server.registry.get("gpu-ng").serving  # no node may start before ACTIVE
    with pytest.raises(client.exceptions.ResourceInUseException):
        client.update_nodegroup_config(
            clusterName="demo", nodegroupName="gpu-ng", scalingConfig={"maxSize": 2}
        )
    server.clock.advance(180)
    update = client.update_nodegroup_config(
        clusterName="demo", nodegroupName="gpu-ng", scalingConfig={"maxSize": 2}
    )
    assert update["update"]["status"] == "InProgress"
    assert (
        client.describe_nodegroup(clusterName="demo", nodegroupName="gpu-ng")["nodegroup"]["status"]
        == "UPDATING"
    )
    server.clock.advance(60)
    described = client.describe_update(name="demo", nodegroupName="gpu-ng", updateId=update["update"]["id"])
    assert described["update"]["status"] == "Successful"

    assert (
        client.delete_nodegroup(clusterName="demo", nodegroupName="gpu-ng")["nodegroup"]["status"]
        == "DELETING"
    )
    server.clock.advance(119)
    assert (
        client.describe_nodegroup(clusterName="demo", nodegroupName="gpu-ng")["nodegroup"]["status"]
        == "DELETING"
    )
    server.clock.advance(1)
    with pytest.raises(
        client.exceptions.ResourceNotFoundException, match="No node group found for name: gpu-ng"
    ):
        client.describe_nodegroup(clusterName="demo", nodegroupName="gpu-ng")
    assert server.registry.list() == []


def test_waiters_follow_creating_and_deleting(server: Server, client: Any) -> None:
    """boto3's own waiters, polled while the simulated clock moves on."""
    server.api.timings.eks_nodegroup_create = server.api.timings.eks_nodegroup_delete = 90
    create_gpu_nodegroup(client)
    waiter = client.get_waiter("nodegroup_active")
    config = {"Delay": 0, "MaxAttempts": 1}
    with pytest.raises(botocore.exceptions.WaiterError, match="Max attempts exceeded"):
        waiter.wait(clusterName="demo", nodegroupName="gpu-ng", WaiterConfig=config)
    server.clock.advance(90)
    waiter.wait(clusterName="demo", nodegroupName="gpu-ng", WaiterConfig=config)

    client.delete_nodegroup(clusterName="demo", nodegroupName="gpu-ng")
    deleted = client.get_waiter("nodegroup_deleted")
    with pytest.raises(botocore.exceptions.WaiterError, match="Max attempts exceeded"):
        deleted.wait(clusterName="demo", nodegroupName="gpu-ng", WaiterConfig=config)
    server.clock.advance(90)
    deleted.wait(clusterName="demo", nodegroupName="gpu-ng", WaiterConfig=config)


def test_an_unknown_instance_type_ends_create_failed(server: Server, client: Any) -> None:
    server.api.timings.eks_nodegroup_create = 60
    create_gpu_nodegroup(client, instanceTypes=["g4dn.xlarg"])
    server.clock.advance(60)
    found = client.describe_nodegroup(clusterName="demo", nodegroupName="gpu-ng")["nodegroup"]
    assert found["status"] == "CREATE_FAILED"
    assert found["health"]["issues"] == [
        {
            "code": "Ec2LaunchTemplateInvalidConfiguration",
            "message": "The specified instance type g4dn.xlarg is not valid",
            "resourceIds": ["eks-gpu-ng-asg"],
        }
    ]
    assert not server.registry.get("gpu-ng").serving
    with pytest.raises(botocore.exceptions.WaiterError, match="terminal failure state"):
        client.get_waiter("nodegroup_active").wait(
            clusterName="demo", nodegroupName="gpu-ng", WaiterConfig={"Delay": 0, "MaxAttempts": 1}
        )


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        ({"minSize": 3, "maxSize": 2, "desiredSize": 2}, "can't be greater than maximum capacity"),
        ({"minSize": 0, "maxSize": 2, "desiredSize": 3}, "Desired capacity 3 must be between"),
        ({"minSize": 2, "maxSize": 4, "desiredSize": 1}, "Desired capacity 1 must be between"),
    ],
)
def test_invalid_scaling_is_rejected(
    server: Server, client: Any, scaling: dict[str, int], message: str
) -> None:
    with pytest.raises(client.exceptions.InvalidParameterException, match=message):
        create_gpu_nodegroup(client, scalingConfig=scaling)
    assert server.registry.list() == []


def test_errors_are_catchable_as_modeled_exceptions(server: Server, client: Any) -> None:
    create_gpu_nodegroup(client)
    with pytest.raises(client.exceptions.ResourceInUseException, match="already exists"):
        create_gpu_nodegroup(client)
    with pytest.raises(
        client.exceptions.ResourceNotFoundException, match="No node group found for name: nope"
    ):
        client.describe_nodegroup(clusterName="demo", nodegroupName="nope")
    with pytest.raises(client.exceptions.ResourceNotFoundException, match="No cluster found"):
        client.list_nodegroups(clusterName="other")
    with pytest.raises(client.exceptions.InvalidParameterException, match="taint effect"):
        create_gpu_nodegroup(client, nodegroupName="bad", taints=[GPU_TAINT | {"effect": "NoSchedule"}])
    with pytest.raises(client.exceptions.InvalidParameterException, match="both added and removed"):
        client.update_nodegroup_config(
            clusterName="demo",
            nodegroupName="gpu-ng",
            labels={"addOrUpdateLabels": {"a": "b"}, "removeLabels": ["a"]},
        )
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_update(name="demo", updateId="missing", nodegroupName="gpu-ng")
    assert [p.name for p in server.registry.list()] == ["gpu-ng"]


def test_list_pages_and_ignores_other_clouds(server: Server, client: Any) -> None:
    server.registry.create(NodePool(name="gke-pool", cloud=GKE, machine_type="n1-standard-4"))
    for name in ("a", "b", "c"):
        create_gpu_nodegroup(client, nodegroupName=name)
    pages = client.get_paginator("list_nodegroups").paginate(
        clusterName="demo", PaginationConfig={"PageSize": 2}
    )
    assert [page["nodegroups"] for page in pages] == [["a", "b"], ["c"]]
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_nodegroup(clusterName="demo", nodegroupName="gke-pool")
    assert client.describe_cluster(name="demo")["cluster"]["endpoint"] == server.url


def test_asg_tags_can_be_added_for_scale_from_zero(server: Server, client: Any) -> None:
    create_gpu_nodegroup(client)
    heard: list[str] = []
    server.registry.subscribe(heard.append)
    template = {"k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1"}
    tags = eks.set_asg_tags(server.registry, "gpu-ng", template)
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "1"
    assert tags["eks:nodegroup-name"] == "gpu-ng"
    assert "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu" not in eks.delete_asg_tags(
        server.registry, "gpu-ng", template
    )
    assert heard == ["gpu-ng", "gpu-ng"]
