"""The simulated EC2 Auto Scaling Query API driven by the real boto3 client: groups and their tags."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.exceptions
import pytest

from sim.clock import Clock
from sim.cluster import asg, eks
from sim.cluster.pools import PoolRegistry
from tests.sim import routes_server

TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"


@dataclass
class Server:
    url: str
    registry: PoolRegistry
    clock: Clock


@pytest.fixture
def server() -> Iterator[Server]:
    registry, clock = PoolRegistry(), Clock()
    routes = eks.EksApi(registry, cluster="demo", region="us-east-1", clock=clock).routes()
    routes += asg.AutoScalingApi(registry, region="us-east-1", clock=clock).routes()
    with routes_server.serve(routes) as url:
        yield Server(url, registry, clock)


def client(server: Server, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def create_nodegroup(server: Server, name: str = "gpu-ng") -> str:
    created = client(server, "eks").create_nodegroup(
        clusterName="demo",
        nodegroupName=name,
        scalingConfig={"minSize": 0, "maxSize": 5, "desiredSize": 0},
        subnets=["subnet-1"],
        nodeRole="arn:aws:iam::123456789012:role/node",
        instanceTypes=["g4dn.xlarge"],
    )
    return str(created["nodegroup"]["resources"]["autoScalingGroups"][0]["name"])


def tag(group: str, key: str, value: str) -> dict[str, Any]:
    return {
        "ResourceId": group,
        "ResourceType": "auto-scaling-group",
        "Key": key,
        "Value": value,
        "PropagateAtLaunch": False,
    }


def test_a_nodegroup_has_a_group_with_the_discovery_tags(server: Server) -> None:
    group = create_nodegroup(server)
    found = client(server, "autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    (described,) = found["AutoScalingGroups"]
    assert (described["AutoScalingGroupName"], described["MinSize"], described["MaxSize"]) == (group, 0, 5)
    assert described["DesiredCapacity"] == 0 and described["AvailabilityZones"] == ["us-east-1a"]
    tags = {t["Key"]: t["Value"] for t in described["Tags"]}
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/demo"] == "owned"
    assert all(t["ResourceId"] == group and t["PropagateAtLaunch"] for t in described["Tags"])


def test_tags_are_created_updated_filtered_and_deleted(server: Server) -> None:
    group, other = create_nodegroup(server), create_nodegroup(server, "cpu-ng")
    autoscaling = client(server, "autoscaling")
    gpu_tag = TEMPLATE + "resources/nvidia.com/gpu"
    autoscaling.create_or_update_tags(Tags=[tag(group, gpu_tag, "1"), tag(group, TEMPLATE + "label/a", "b")])
    autoscaling.create_or_update_tags(Tags=[tag(group, gpu_tag, "4")])
    assert server.registry.get("gpu-ng").extra["asgTags"][gpu_tag] == "4"

    found = autoscaling.describe_tags(Filters=[{"Name": "key", "Values": [gpu_tag]}])["Tags"]
    assert [(t["ResourceId"], t["Value"], t["PropagateAtLaunch"]) for t in found] == [(group, "4", False)]
    by_group = autoscaling.describe_tags(Filters=[{"Name": "auto-scaling-group", "Values": [other]}])["Tags"]
    assert {t["ResourceId"] for t in by_group} == {other}
    tagged = autoscaling.describe_auto_scaling_groups(Filters=[{"Name": "tag-key", "Values": [gpu_tag]}])
    assert [g["AutoScalingGroupName"] for g in tagged["AutoScalingGroups"]] == [group]

    autoscaling.delete_tags(Tags=[tag(group, gpu_tag, "")])
    assert gpu_tag not in server.registry.get("gpu-ng").extra["asgTags"]
    assert TEMPLATE + "label/a" in server.registry.get("gpu-ng").extra["asgTags"]


def test_a_group_follows_its_nodegroup(server: Server) -> None:
    group = create_nodegroup(server)
    client(server, "eks").update_nodegroup_config(
        clusterName="demo", nodegroupName="gpu-ng", scalingConfig={"minSize": 1, "desiredSize": 2}
    )
    (described,) = client(server, "autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])[
        "AutoScalingGroups"
    ]
    assert (described["MinSize"], described["DesiredCapacity"]) == (1, 2)
    client(server, "eks").delete_nodegroup(clusterName="demo", nodegroupName="gpu-ng")
    assert client(server, "autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"] == []


def test_bad_tags_change_nothing(server: Server) -> None:
    group = create_nodegroup(server)
    before = dict(server.registry.get("gpu-ng").extra["asgTags"])
    autoscaling = client(server, "autoscaling")
    with pytest.raises(botocore.exceptions.ClientError, match="AutoScalingGroup name not found - nope"):
        autoscaling.create_or_update_tags(Tags=[tag(group, "a", "1"), tag("nope", "b", "2")])
    with pytest.raises(botocore.exceptions.ClientError, match="ResourceType must be auto-scaling-group"):
        autoscaling.create_or_update_tags(Tags=[tag(group, "a", "1") | {"ResourceType": "instance"}])
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        autoscaling.describe_tags(Filters=[{"Name": "colour", "Values": ["red"]}])
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert server.registry.get("gpu-ng").extra["asgTags"] == before
