"""Adapter: Kueue's objects over the official client: three informers (Workloads and LocalQueues of the
workload namespace, the ClusterQueues) on `kube.Informer`, and one read of the visibility API.

Only started when a profile has `queue:`; the Helm chart grants these reads only then. Paths are Kueue
v0.19.2's (apis/kueue/v1beta2, apis/visibility/v1beta2/types.go: the LocalQueue's `pendingworkloads`
subresource, a PendingWorkloadsSummary).
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client

from bot.adapters import kube
from bot.core import doctor_facts, errors, kueue, ports

logger = logging.getLogger(__name__)

API_VERSION = f"{kueue.GROUP}/{kueue.VERSION}"
PENDING_PATH = "/apis/{group}/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"
CLUSTER_QUEUES = (kueue.GROUP, kueue.VERSION, kueue.CLUSTER_QUEUES)
"""The custom-object API's group, version and plural of the (cluster-scoped) ClusterQueues."""


class KueueWatch:
    """The Kueue informers of one cluster, registered with the cluster's own so `stop()` ends them too."""

    def __init__(self, cluster: kube.KubeCluster) -> None:
        self.cluster = cluster
        self.custom = client.CustomObjectsApi(cluster.api)

    def start(
        self,
        *,
        on_workload: ports.WatchCallback,
        on_local_queue: ports.WatchCallback,
        on_cluster_queue: ports.WatchCallback,
    ) -> None:
        namespaced = (kueue.GROUP, kueue.VERSION, self.cluster.namespace)
        list_namespaced = self.custom.list_namespaced_custom_object
        for kind, plural, callback in (
            ("Workload", kueue.WORKLOADS, on_workload),
            ("LocalQueue", kueue.LOCAL_QUEUES, on_local_queue),
        ):
            source = kube.Source(kind, list_namespaced, (*namespaced, plural), api_version=API_VERSION)
            self.cluster.add_informer(source, callback)
        source = kube.Source(
            "ClusterQueue", self.custom.list_cluster_custom_object, CLUSTER_QUEUES, api_version=API_VERSION
        )
        self.cluster.add_informer(source, on_cluster_queue)

    def pending_in(self, local_queue: str) -> dict[str, Any] | None:
        """The LocalQueue's PendingWorkloadsSummary; None when the visibility API does not answer (not
        installed, not allowed, down): the caller falls back to the Workloads' own order."""
        api = self.cluster.api
        params = {
            "group": kueue.VISIBILITY_GROUP,
            "version": kueue.VISIBILITY_VERSION,
            "namespace": self.cluster.namespace,
            "name": local_queue,
        }

        def request(*, _preload_content: bool, _request_timeout: Any) -> Any:
            """The client's own call path, as its generated `get_*` methods take it (no method exists for
            a custom subresource): serialize, send, raise non-2xx as ApiException, hand back the raw body."""
            serialized = api.param_serialize(
                "GET",
                PENDING_PATH,
                path_params=params,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            return api._call_with_legacy_options(
                serialized, {"200": "object"}, None, _preload_content, _request_timeout, True
            )

        try:
            return self.cluster.read(f"reading Kueue's pending workloads in {local_queue}", request)
        except errors.GpubotError as err:
            logger.info(
                "Kueue's visibility API did not answer for %s (%s): using Workload order", local_queue, err
            )
            return None

    def read_facts(self) -> doctor_facts.KueueFacts:
        """What `gpubot doctor` checks: Kueue's API served, the namespace's LocalQueues, the ClusterQueues."""
        namespaced = (kueue.GROUP, kueue.VERSION, self.cluster.namespace, kueue.LOCAL_QUEUES)
        try:
            local = self.cluster.read(
                "listing LocalQueues", self.custom.list_namespaced_custom_object, *namespaced
            )
            found = self.cluster.read(
                "listing ClusterQueues", self.custom.list_cluster_custom_object, *CLUSTER_QUEUES
            )
        except errors.NotFound:
            return doctor_facts.KueueFacts(served=False)
        except errors.GpubotError as err:
            return doctor_facts.KueueFacts(served=True, error=str(err))
        targets = dict(kueue.local_queue_target(item) for item in local.get("items") or [])
        queues = [kueue.read_cluster_queue(item) for item in found.get("items") or []]
        return doctor_facts.KueueFacts(
            served=True,
            local_queues={key.split("/", 1)[1]: target for key, target in targets.items()},
            cluster_queues={q.name: q for q in queues},
        )
