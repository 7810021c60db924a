"""Adapter: the `PoolManager` port over boto3, for one EKS cluster's managed nodegroups and their ASGs.

A managed nodegroup's own tags never reach its Auto Scaling group, and the Cluster Autoscaler reads the
group's: so after the nodegroup is ACTIVE its group is tagged through the EC2 Auto Scaling API, and
`get_pool` reads those tags back with the group's desired capacity (what the autoscaler moves).

Creating and deleting a nodegroup take minutes: boto3's own waiters (`nodegroup_active`,
`nodegroup_deleted`) judge each look, one attempt at a time so the caller's watch hears of every one;
config updates have no waiter, so `describe_update` is polled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import boto3
import botocore.exceptions

from bot.adapters import cloud_waits
from bot.core import errors, labels, machines, operations, pools, taints
from bot.settings import CloudSettings

logger = logging.getLogger(__name__)

EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
KUBE_EFFECTS = {name: kube for kube, name in EFFECTS.items()}
NOT_FOUND = frozenset({"ResourceNotFoundException", "NotFoundException"})
CONFLICT = frozenset({"ResourceInUseException", "AlreadyExists", "ResourceLimitExceededException"})
THROTTLED = frozenset({"Throttling", "ThrottlingException", "TooManyRequestsException"})


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """botocore's exceptions become the core's taxonomy here, at the edge."""
    try:
        yield
    except botocore.exceptions.ClientError as err:
        code = str(err.response.get("Error", {}).get("Code", ""))
        message = str(err.response.get("Error", {}).get("Message", "")) or str(err)
        if code in NOT_FOUND:
            raise errors.NotFound(message) from err
        if code in CONFLICT:
            raise errors.Conflict(message) from err
        if code in THROTTLED:
            raise errors.RateLimited(message) from err
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        raise (errors.Unavailable(message) if status >= 500 else errors.Invalid(message)) from err
    except botocore.exceptions.WaiterError as err:
        raise errors.Unavailable(f"EKS did not finish: {err}") from err
    except (botocore.exceptions.NoCredentialsError, botocore.exceptions.NoRegionError) as err:
        raise errors.Invalid(f"{err} (configure AWS credentials and a region, or pass --region)") from err
    except botocore.exceptions.ParamValidationError as err:
        raise errors.Invalid(str(err)) from err
    except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionError) as err:
        raise errors.Unavailable(f"cannot reach AWS: {err}") from err


def client(service: str, endpoint: str, settings: CloudSettings) -> Any:
    """A boto3 client; on a plain-http endpoint (a local emulator) with placeholder keys, never real ones."""
    options: dict[str, Any] = {"region_name": settings.aws_region or None}
    if endpoint:
        options["endpoint_url"] = endpoint
    if endpoint.startswith("http://"):
        options |= {"aws_access_key_id": "emulator", "aws_secret_access_key": "emulator"}
    with translated():
        return boto3.client(service, **options)


def taints_json(found: tuple[taints.Taint, ...]) -> list[dict[str, str]]:
    return [{"key": t.key, "value": t.value, "effect": EFFECTS[t.effect]} for t in found]


def tags_json(group: str, tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """Template tags describe nodes for the autoscaler; they need not be copied onto instances."""
    return [
        {
            "ResourceId": group,
            "ResourceType": "auto-scaling-group",
            "Key": key,
            "Value": value,
            "PropagateAtLaunch": False,
        }
        for key, value in tags.items()
    ]


def pool_view(
    nodegroup: Mapping[str, Any], group: Mapping[str, Any] | None, *, cluster: str
) -> pools.PoolView:
    scaling = nodegroup.get("scalingConfig") or {}
    instance = (nodegroup.get("instanceTypes") or [""])[0]
    node_labels = {str(k): str(v) for k, v in (nodegroup.get("labels") or {}).items()}
    built_in = machines.built_in_gpus(machines.EKS, instance)
    accelerator = node_labels.get(labels.EKS_ACCELERATOR_LABEL) or (built_in[0] if built_in else "")
    tags = {str(t["Key"]): str(t.get("Value", "")) for t in (group or {}).get("Tags") or []}
    desired = (group or {}).get("DesiredCapacity", scaling.get("desiredSize"))
    return pools.PoolView(
        cloud=pools.Cloud.EKS,
        name=str(nodegroup.get("nodegroupName", "")),
        cluster=cluster,
        status=str(nodegroup.get("status", "")),
        autoscaling=True,  # a managed nodegroup is always an ASG the autoscaler may move
        min_size=int(scaling.get("minSize", 0)),
        max_size=int(scaling.get("maxSize", 0)),
        current_size=None if desired is None else int(desired),
        machine_type=instance,
        accelerator_type=accelerator,
        accelerator_count=built_in[1] if built_in else None,
        labels=node_labels,
        taints=tuple(
            taints.Taint(str(t.get("key", "")), str(t.get("value", "")), KUBE_EFFECTS.get(t["effect"], ""))
            for t in nodegroup.get("taints") or []
        ),
        ami_type=str(nodegroup.get("amiType", "")),
        asg_name=str(group.get("AutoScalingGroupName", "")) if group else "",
        asg_tags=tags,
    )


class EksPools:
    """`ports.PoolManager` for the managed nodegroups of one EKS cluster."""

    def __init__(self, eks: Any, autoscaling: Any, *, cluster: str, settings: CloudSettings) -> None:
        self.eks, self.autoscaling = eks, autoscaling
        self.cluster = cluster
        self.settings = settings

    @classmethod
    def connect(cls, settings: CloudSettings, *, cluster: str) -> EksPools:
        eks = client("eks", settings.eks_endpoint, settings)
        autoscaling = client("autoscaling", settings.autoscaling_endpoint, settings)
        return cls(eks, autoscaling, cluster=cluster, settings=settings)

    def create_pool(self, spec: pools.PoolSpec, *, watch: operations.Watch | None = None) -> pools.PoolView:
        with translated():
            self.eks.create_nodegroup(
                clusterName=self.cluster,
                nodegroupName=spec.name,
                scalingConfig={
                    "minSize": spec.min_size,
                    "maxSize": spec.max_size,
                    "desiredSize": spec.min_size,
                },
                subnets=list(spec.subnets),
                nodeRole=spec.node_role,
                instanceTypes=[spec.machine_type],
                amiType=spec.ami_type,
                labels=dict(spec.labels),
                taints=taints_json(spec.taints),
            )
        self.wait_nodegroup("nodegroup_active", operations.Change.CREATE, spec.name, watch)
        logger.info("EKS nodegroup %s created in %s", spec.name, self.cluster)
        self.tag_group(spec.name, spec.asg_tags)
        return self.get_pool(spec.name)

    def tag_group(self, name: str, tags: Mapping[str, str]) -> None:
        groups = self.group_names(self.describe(name))
        if not groups:
            raise errors.Unavailable(f"EKS reports no Auto Scaling group for nodegroup {name} to tag")
        with translated():
            for group in groups:
                self.autoscaling.create_or_update_tags(Tags=tags_json(group, tags))
        logger.info("tagged %s for the Cluster Autoscaler: %s", ", ".join(groups), ", ".join(tags))

    def describe(self, name: str) -> dict[str, Any]:
        with translated():
            found: dict[str, Any] = self.eks.describe_nodegroup(clusterName=self.cluster, nodegroupName=name)[
                "nodegroup"
            ]
        return found

    @staticmethod
    def group_names(nodegroup: Mapping[str, Any]) -> list[str]:
        groups = (nodegroup.get("resources") or {}).get("autoScalingGroups") or []
        return [str(g["name"]) for g in groups if g.get("name")]

    def get_pool(self, name: str) -> pools.PoolView:
        nodegroup = self.describe(name)
        return pool_view(nodegroup, self.read_group(nodegroup), cluster=self.cluster)

    def list_pools(self) -> list[pools.PoolView]:
        """Every nodegroup; one whose Auto Scaling group cannot be read says why in its `error`."""
        with translated():
            pages = self.eks.get_paginator("list_nodegroups").paginate(clusterName=self.cluster)
            names = [str(name) for page in pages for name in page.get("nodegroups", [])]
        found = []
        for name in names:
            nodegroup = self.describe(name)
            try:
                found.append(pool_view(nodegroup, self.read_group(nodegroup), cluster=self.cluster))
            except errors.GpubotError as err:
                found.append(
                    dataclasses.replace(pool_view(nodegroup, None, cluster=self.cluster), error=str(err))
                )
        return found

    def read_group(self, nodegroup: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The nodegroup's Auto Scaling group, with its tags; None before EKS made one."""
        names = self.group_names(nodegroup)
        if not names:
            return None
        with translated():
            found = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=names[:1])
        group: Mapping[str, Any] | None = next(iter(found.get("AutoScalingGroups") or []), None)
        return group

    def set_pool_size(
        self, name: str, resize: pools.Resize, *, watch: operations.Watch | None = None
    ) -> pools.PoolView:
        scaling = {"minSize": resize.min_size, "maxSize": resize.max_size}
        if resize.desired_size is not None:
            scaling["desiredSize"] = resize.desired_size
        with translated():
            update = self.eks.update_nodegroup_config(
                clusterName=self.cluster, nodegroupName=name, scalingConfig=scaling
            )["update"]
        self.wait_update(name, str(update["id"]), watch)
        logger.info("EKS nodegroup %s scaling %d..%d", name, resize.min_size, resize.max_size)
        return self.get_pool(name)

    @property
    def region(self) -> str:
        return str(self.eks.meta.region_name or "")

    def check(self, name: str, update_id: str = "") -> str:
        return operations.eks_check(
            cluster=self.cluster, nodegroup=name, region=self.region, update_id=update_id
        )

    def wait_update(self, name: str, update_id: str, watch: operations.Watch | None) -> None:
        """EKS applies a config update in the background; poll it, as there is no waiter for updates."""
        check = self.check(name, update_id)
        waiting = cloud_waits.Waiting(self.settings, watch)
        while True:
            with translated():
                update = self.eks.describe_update(name=self.cluster, updateId=update_id, nodegroupName=name)[
                    "update"
                ]
            if update.get("status") != "InProgress":
                break
            waiting.pause(operations.Pending(operations.Change.RESIZE, "EKS", name, "InProgress", check))
        if update.get("status") != "Successful":
            reasons = "; ".join(str(e.get("errorMessage", "")) for e in update.get("errors") or [])
            reason = f"the update ended {update.get('status')}" + (f": {reasons}" if reasons else "")
            raise errors.OperationFailed(
                operations.failed_text(operations.Change.RESIZE, "EKS", name, reason, check)
            )

    def wait_nodegroup(
        self, waiter_name: str, change: operations.Change, name: str, watch: operations.Watch | None
    ) -> None:
        """boto3's waiter judges each look (ACTIVE or gone: done; CREATE_FAILED, DELETE_FAILED: failed)."""
        waiter = self.eks.get_waiter(waiter_name)
        check = self.check(name)
        waiting = cloud_waits.Waiting(self.settings, watch)
        while True:
            try:
                waiter.wait(
                    clusterName=self.cluster, nodegroupName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 1}
                )
                return
            except botocore.exceptions.WaiterError as err:
                found = (err.last_response or {}).get("nodegroup") or {}
                if err.kwargs.get("reason") != "Max attempts exceeded":
                    raise self.waiter_failure(change, name, err, found, check) from err
            status = str(found.get("status", "")) or "waiting"
            waiting.pause(operations.Pending(change, "EKS", name, status, check))

    @staticmethod
    def waiter_failure(
        change: operations.Change,
        name: str,
        err: botocore.exceptions.WaiterError,
        found: Mapping[str, Any],
        check: str,
    ) -> errors.GpubotError:
        """A failure state in the cloud's words (its health issues), or the describe call's own error."""
        if not found:
            error = (err.last_response or {}).get("Error") or {}
            code, message = str(error.get("Code", "")), str(error.get("Message", "")) or str(err)
            if code in NOT_FOUND:
                return errors.NotFound(message)
            return errors.Unavailable(message)
        issues = ((found.get("health") or {}).get("issues")) or []
        said = "; ".join(f"{i.get('code', '')}: {i.get('message', '')}" for i in issues)
        reason = f"it ended {found.get('status')}" + (f" ({said})" if said else "")
        return errors.OperationFailed(operations.failed_text(change, "EKS", name, reason, check))

    def delete_pool(self, name: str, *, watch: operations.Watch | None = None) -> None:
        with translated():
            self.eks.delete_nodegroup(clusterName=self.cluster, nodegroupName=name)
        self.wait_nodegroup("nodegroup_deleted", operations.Change.DELETE, name, watch)
        logger.info("EKS nodegroup %s deleted from %s", name, self.cluster)
