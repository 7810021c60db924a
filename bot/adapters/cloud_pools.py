"""Adapter: the `CloudPools` port, read-only: a GKE cluster's node pools or an EKS cluster's node groups.

What a pool at zero nodes will be lives only at its cloud: GKE's node config (labels, taints,
accelerators); an EKS node group's labels and taints, and the tags on its Auto Scaling Group, which are
what the Cluster Autoscaler reads to scale a group up from nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.exceptions
from google.api_core import exceptions as google_errors
from google.auth import exceptions as auth_errors
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1

from bot.core import errors, labels, taints
from bot.core.doctor_facts import EKS, GKE, CloudPool, PoolTemplate
from bot.settings import CloudSettings

GKE_EFFECTS = {
    container_v1.NodeTaint.Effect.NO_SCHEDULE: "NoSchedule",
    container_v1.NodeTaint.Effect.PREFER_NO_SCHEDULE: "PreferNoSchedule",
    container_v1.NodeTaint.Effect.NO_EXECUTE: "NoExecute",
}
EKS_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
GPU_TAG = f"k8s.io/cluster-autoscaler/node-template/resources/{labels.GPU_RESOURCE}"


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Both clouds' exceptions become the core's taxonomy here; doctor only needs the words."""
    try:
        yield
    except google_errors.NotFound as err:
        raise errors.NotFound(str(err.message)) from err
    except (google_errors.GoogleAPICallError, google_errors.RetryError) as err:
        raise errors.Unavailable(str(err)) from err
    except auth_errors.GoogleAuthError as err:
        raise errors.Invalid(f"no usable Google credentials: {err}") from err
    except botocore.exceptions.ClientError as err:
        message = str(err.response.get("Error", {}).get("Message", "")) or str(err)
        raise errors.Unavailable(message) from err
    except botocore.exceptions.BotoCoreError as err:
        raise errors.Unavailable(str(err)) from err


class GkeCloudPools:
    def __init__(self, settings: CloudSettings, *, project: str, location: str, cluster: str) -> None:
        credentials = None
        options: dict[str, Any] = {}
        if settings.gke_endpoint:
            options["api_endpoint"] = settings.gke_endpoint
            if settings.gke_endpoint.startswith("http://"):  # a local emulator: never send real credentials
                credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
        with translated():
            self.client = container_v1.ClusterManagerClient(
                transport="rest", credentials=credentials, client_options=options
            )
        self.parent = f"projects/{project}/locations/{location}/clusters/{cluster}"

    def list_cloud_pools(self) -> list[CloudPool]:
        with translated():
            found = self.client.list_node_pools(parent=self.parent)
        return [self._cloud_pool(pool) for pool in found.node_pools]

    @staticmethod
    def _cloud_pool(pool: container_v1.NodePool) -> CloudPool:
        config = pool.config
        gpus = sum(int(a.accelerator_count) for a in config.accelerators)
        template = PoolTemplate(
            source=f"the GKE node pool's config ({pool.name})",
            labels=dict(config.labels),
            taints=tuple(
                taints.Taint(t.key, t.value, GKE_EFFECTS.get(t.effect, str(t.effect))) for t in config.taints
            ),
            gpus=gpus or None,
            gpu_hint=gpus > 0,
        )
        return CloudPool(name=pool.name, cloud=GKE, template=template)


def boto_client(service: str, endpoint: str, settings: CloudSettings) -> Any:
    options: dict[str, Any] = {"region_name": settings.aws_region or None}
    if endpoint:
        options["endpoint_url"] = endpoint
    if endpoint.startswith("http://"):  # a local emulator: placeholder keys, never real ones
        options |= {"aws_access_key_id": "emulator", "aws_secret_access_key": "emulator"}
    with translated():
        return boto3.client(service, **options)


class EksCloudPools:
    def __init__(self, settings: CloudSettings, *, cluster: str) -> None:
        self.eks = boto_client("eks", settings.eks_endpoint, settings)
        self.autoscaling = boto_client("autoscaling", settings.autoscaling_endpoint, settings)
        self.cluster = cluster

    def list_cloud_pools(self) -> list[CloudPool]:
        with translated():
            pages = self.eks.get_paginator("list_nodegroups").paginate(clusterName=self.cluster)
            names = [name for page in pages for name in page.get("nodegroups", [])]
            return [self._cloud_pool(name) for name in names]

    def _cloud_pool(self, name: str) -> CloudPool:
        found = self.eks.describe_nodegroup(clusterName=self.cluster, nodegroupName=name)["nodegroup"]
        groups = [g["name"] for g in (found.get("resources") or {}).get("autoScalingGroups") or []]
        group = groups[0] if groups else ""
        tags, error = self._tags(group) if group else ({}, "the node group has no Auto Scaling Group yet")
        count = tags.get(GPU_TAG, "")
        ami = str(found.get("amiType", ""))
        template = PoolTemplate(
            source=f"the EKS node group ({name})",
            labels=dict(found.get("labels") or {}),
            taints=tuple(
                taints.Taint(t["key"], t.get("value", ""), EKS_EFFECTS.get(t.get("effect", ""), ""))
                for t in found.get("taints") or []
            ),
            gpus=int(count) if count.isdigit() else None,
            gpu_hint="GPU" in ami or "NVIDIA" in ami,
        )
        return CloudPool(name=name, cloud=EKS, template=template, group=group, asg_tags=tags, error=error)

    def _tags(self, group: str) -> tuple[dict[str, str], str]:
        try:
            with translated():
                pages = self.autoscaling.get_paginator("describe_tags").paginate(
                    Filters=[{"Name": "auto-scaling-group", "Values": [group]}]
                )
                return {t["Key"]: t.get("Value", "") for page in pages for t in page.get("Tags", [])}, ""
        except errors.GpubotError as err:
            return {}, str(err)
