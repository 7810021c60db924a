"""Adapter: the `PoolManager` port over google-cloud-container, for one GKE cluster's node pools.

The REST transport is used everywhere: it is what the client needs to reach a plain-http endpoint (the
sim), and it behaves the same against Google. The client does not wait for Operations (a node pool's
take minutes), so this adapter polls each one until DONE, as gcloud does, tells the caller's watch at each
look, and reads failures from the Operation's error or status message.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import requests
from google.api_core import exceptions as google_errors
from google.auth import exceptions as auth_errors
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1

from bot.adapters import cloud_waits
from bot.core import errors, machines, operations, pools, taints
from bot.settings import CloudSettings

logger = logging.getLogger(__name__)

EFFECTS = {
    "NoSchedule": container_v1.NodeTaint.Effect.NO_SCHEDULE,
    "PreferNoSchedule": container_v1.NodeTaint.Effect.PREFER_NO_SCHEDULE,
    "NoExecute": container_v1.NodeTaint.Effect.NO_EXECUTE,
}
KUBE_EFFECTS = {code: name for name, code in EFFECTS.items()}


def api_message(err: google_errors.GoogleAPICallError) -> str:
    """GKE's own words from the error body; the exception's message starts with the method and URL."""
    try:
        return str(err.response.json()["error"]["message"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return str(err.message)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Google's exceptions become the core's taxonomy here, at the edge."""
    try:
        yield
    except google_errors.NotFound as err:
        raise errors.NotFound(api_message(err)) from err
    except (google_errors.Conflict, google_errors.AlreadyExists) as err:
        raise errors.Conflict(api_message(err)) from err
    except google_errors.TooManyRequests as err:
        raise errors.RateLimited(api_message(err)) from err
    except google_errors.ServerError as err:
        raise errors.Unavailable(api_message(err)) from err
    except google_errors.RetryError as err:
        raise errors.Unavailable(str(err)) from err
    except google_errors.GoogleAPICallError as err:
        raise errors.Invalid(api_message(err)) from err
    except auth_errors.GoogleAuthError as err:
        raise errors.Invalid(f"no usable Google credentials: {err}") from err
    except requests.RequestException as err:
        raise errors.Unavailable(f"cannot reach the GKE API: {err}") from err


def client(settings: CloudSettings) -> container_v1.ClusterManagerClient:
    """Google's endpoint with Application Default Credentials, or the configured one."""
    options: dict[str, Any] = {}
    credentials = None
    if settings.gke_endpoint:
        options["api_endpoint"] = settings.gke_endpoint
        if settings.gke_endpoint.startswith("http://"):
            credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    with translated():
        return container_v1.ClusterManagerClient(
            transport="rest", credentials=credentials, client_options=options
        )


def node_pool(spec: pools.PoolSpec) -> container_v1.NodePool:
    """The seed's `gcloud container node-pools create` step as one request, starting at zero nodes."""
    accelerator = container_v1.AcceleratorConfig(
        accelerator_type=spec.accelerator_type,
        accelerator_count=spec.accelerator_count,
        # GKE installs the driver itself; without this, nodes wait for a driver DaemonSet.
        gpu_driver_installation_config=container_v1.GPUDriverInstallationConfig(
            gpu_driver_version=container_v1.GPUDriverInstallationConfig.GPUDriverVersion.DEFAULT
        ),
    )
    return container_v1.NodePool(
        name=spec.name,
        initial_node_count=0,
        config=container_v1.NodeConfig(
            machine_type=spec.machine_type,
            accelerators=[accelerator],
            labels=dict(spec.labels),
            taints=[
                container_v1.NodeTaint(key=t.key, value=t.value, effect=EFFECTS[t.effect])
                for t in spec.taints
            ],
        ),
        autoscaling=container_v1.NodePoolAutoscaling(
            enabled=True, min_node_count=spec.min_size, max_node_count=spec.max_size
        ),
        management=container_v1.NodeManagement(auto_repair=True, auto_upgrade=True),
    )


def pool_view(found: container_v1.NodePool, *, cluster: str) -> pools.PoolView:
    config = found.config
    accelerators = list(config.accelerators)
    built_in = machines.built_in_gpus(machines.GKE, config.machine_type)
    if accelerators:
        accelerator, count = accelerators[0].accelerator_type, int(accelerators[0].accelerator_count)
    else:
        accelerator, count = built_in or ("", 0)
    scaling = found.autoscaling
    total = scaling.total_max_node_count > 0  # location-policy pools count nodes across zones
    return pools.PoolView(
        cloud=pools.Cloud.GKE,
        name=found.name,
        cluster=cluster,
        status=found.status.name,
        autoscaling=bool(scaling.enabled),
        min_size=int(scaling.total_min_node_count if total else scaling.min_node_count),
        max_size=int(scaling.total_max_node_count if total else scaling.max_node_count),
        current_size=None,  # the container API does not report it; the nodes do
        machine_type=config.machine_type,
        accelerator_type=accelerator,
        accelerator_count=count,
        labels=dict(config.labels),
        taints=tuple(
            taints.Taint(t.key, t.value, KUBE_EFFECTS.get(t.effect, str(t.effect.name)))
            for t in config.taints
        ),
    )


class GkePools:
    """`ports.PoolManager` for the node pools of one cluster: projects/P/locations/L/clusters/C."""

    def __init__(
        self,
        client: container_v1.ClusterManagerClient,
        *,
        project: str,
        location: str,
        cluster: str,
        settings: CloudSettings,
    ) -> None:
        self.client = client
        self.project, self.location, self.cluster = project, location, cluster
        self.settings = settings

    @classmethod
    def connect(cls, settings: CloudSettings, *, project: str, location: str, cluster: str) -> GkePools:
        return cls(client(settings), project=project, location=location, cluster=cluster, settings=settings)

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"

    def pool_path(self, name: str) -> str:
        return f"{self.parent}/nodePools/{name}"

    def create_pool(self, spec: pools.PoolSpec, *, watch: operations.Watch | None = None) -> pools.PoolView:
        with translated():
            operation = self.client.create_node_pool(parent=self.parent, node_pool=node_pool(spec))
        self.wait(operation, operations.Change.CREATE, spec.name, watch)
        logger.info("GKE node pool %s created in %s", spec.name, self.parent)
        return self.get_pool(spec.name)

    def get_pool(self, name: str) -> pools.PoolView:
        with translated():
            found = self.client.get_node_pool(name=self.pool_path(name))
        return pool_view(found, cluster=self.cluster)

    def list_pools(self) -> list[pools.PoolView]:
        with translated():
            found = self.client.list_node_pools(parent=self.parent)
        return [pool_view(pool, cluster=self.cluster) for pool in found.node_pools]

    def set_pool_size(
        self, name: str, resize: pools.Resize, *, watch: operations.Watch | None = None
    ) -> pools.PoolView:
        """GKE's own autoscaler moves the size, so only the bounds are set."""
        request = container_v1.SetNodePoolAutoscalingRequest(
            name=self.pool_path(name),
            autoscaling=container_v1.NodePoolAutoscaling(
                enabled=True, min_node_count=resize.min_size, max_node_count=resize.max_size
            ),
        )
        with translated():
            operation = self.client.set_node_pool_autoscaling(request=request)
        self.wait(operation, operations.Change.RESIZE, name, watch)
        logger.info("GKE node pool %s autoscaling %d..%d", name, resize.min_size, resize.max_size)
        return self.get_pool(name)

    def delete_pool(self, name: str, *, watch: operations.Watch | None = None) -> None:
        with translated():
            operation = self.client.delete_node_pool(name=self.pool_path(name))
        self.wait(operation, operations.Change.DELETE, name, watch)
        logger.info("GKE node pool %s deleted from %s", name, self.parent)

    def wait(
        self,
        operation: container_v1.Operation,
        change: operations.Change,
        pool: str,
        watch: operations.Watch | None,
    ) -> None:
        """Poll until DONE (the first look at once, as gcloud's); a failed Operation is `OperationFailed`."""
        name = f"projects/{self.project}/locations/{self.location}/operations/{operation.name}"
        check = operations.gke_check(project=self.project, location=self.location, operation=operation.name)
        waiting = cloud_waits.Waiting(self.settings, watch)
        while True:
            with translated():
                operation = self.client.get_operation(name=name)
            if operation.status == container_v1.Operation.Status.DONE:
                break
            waiting.pause(operations.Pending(change, "GKE", pool, operation.status.name, check))
        # gcloud reads only statusMessage, the Python client error: a failure may fill either.
        message = operation.error.message or operation.status_message
        if message:
            raise errors.OperationFailed(operations.failed_text(change, "GKE", pool, message, check))
