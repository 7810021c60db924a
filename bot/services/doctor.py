"""Services: gather what `gpubot doctor` checks, through the ports; the checks themselves are pure (core).

Gathering never stops at the first failure: what could not be read becomes a fact ("could not read
…") for the checks to word, so one run reports everything an operator has to fix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from bot.core import (
    autoscaler_status,
    cluster_nodes,
    doctor,
    doctor_facts,
    errors,
    models,
    notices,
    pools,
    ports,
    provisioning,
)
from bot.core.doctor_facts import EKS, Facts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    namespace: str
    """Where gpubot runs its pods: the namespace its permissions are probed in."""
    profiles: Mapping[str, models.GpuProfile] = field(default_factory=dict)
    profiles_error: str = ""
    manifest: doctor_facts.Manifest | None = None
    pools: frozenset[str] = frozenset()
    """Only these pools; empty: every pool that looks like a GPU pool."""
    max_node_provision_time: timedelta = doctor_facts.MAX_NODE_PROVISION_TIME
    cloud: str = ""
    cluster: str = ""
    """The cluster's name at its cloud, for the fix commands."""
    warm_configmap: str = ""
    """The running bot's warm schedules' ConfigMap, whose access is probed too; empty from a laptop."""
    lease_name: str = ""
    """The running bot's leader Lease, which its Role names; empty from a laptop (any Lease)."""


def gather(
    request: Request,
    *,
    probe: ports.ClusterProbe,
    store: ports.Store,
    cloud: ports.PoolManager | None,
    clock: Callable[[], datetime],
    read_kueue: Callable[[], doctor_facts.KueueFacts] | None = None,
) -> Facts:
    """`read_kueue` reads Kueue's objects, asked only when a profile has `queue:`."""
    queued = any(p.queue for p in request.profiles.values())
    facts = Facts(
        namespace=request.namespace,
        kueue=read_kueue() if queued and read_kueue is not None else None,
        profiles=request.profiles,
        profiles_error=request.profiles_error,
        manifest=request.manifest,
        max_node_provision_time=request.max_node_provision_time,
        cluster=request.cluster,
        cloud=request.cloud,
        permissions=probe_permissions(
            probe, request.namespace, warm_configmap=request.warm_configmap, lease_name=request.lease_name
        ),
    )
    try:
        nodes = [cluster_nodes.read(node) for node in probe.list_node_objects()]
    except errors.GpubotError as err:
        return replace(facts, cluster_error=f"listing nodes failed: {err}")
    found = read_autoscaler(probe, clock)
    cloud_pools, cloud_error = read_cloud(cloud)
    text = found.text
    parsed = autoscaler_status.parse(text)
    readable = text is not None and parsed.structured
    groups = parsed.sizes()
    gpu_pools = doctor_facts.assemble_pools(
        nodes, groups, status_readable=readable, cloud=cloud_pools, only=request.pools
    )
    known = doctor_facts.known_pools(nodes, groups, cloud_pools)
    return replace(
        facts,
        pools=gpu_pools,
        unknown_pools=tuple(sorted(request.pools - known)),
        known_pools=tuple(sorted(known)),
        autoscaler=found,
        cloud_error=cloud_error,
        provisioning={p.name: tuple(store.samples(provisioning.series(p.name))) for p in gpu_pools},
        eks=eks_groups(request, gpu_pools, cloud_pools),
    )


def read_autoscaler(probe: ports.ClusterProbe, clock: Callable[[], datetime]) -> doctor_facts.AutoscalerFacts:
    """The status as the API has it; this machine's clock only when the server's Date is missing."""
    try:
        found = probe.read_autoscaler_configmap()
    except errors.GpubotError as err:
        return doctor_facts.AutoscalerFacts(error=str(err), now=clock())
    return found if found.now is not None else replace(found, now=clock())


def read_cloud(cloud: ports.PoolManager | None) -> tuple[dict[str, pools.PoolView], str]:
    if cloud is None:
        return {}, ""
    try:
        return {p.name: p for p in cloud.list_pools()}, ""
    except errors.GpubotError as err:
        logger.warning("could not read the cloud's node pools: %s", err)
        return {}, str(err)


def eks_groups(
    request: Request, found: tuple[doctor_facts.PoolFacts, ...], cloud_pools: Mapping[str, pools.PoolView]
) -> tuple[pools.PoolView, ...] | None:
    """The GPU pools' node groups with their ASG tags, when an EKS cluster was asked."""
    if request.cloud != EKS:
        return None
    return tuple(cloud_pools[p.name] for p in found if p.name in cloud_pools)


def probe_permissions(
    probe: ports.ClusterProbe, namespace: str, *, warm_configmap: str = "", lease_name: str = ""
) -> doctor_facts.Permissions:
    answers = []
    for rule in doctor.required_access(namespace, warm_configmap=warm_configmap, lease_name=lease_name):
        try:
            answers.append(probe.review_access(rule))
        except errors.GpubotError as err:
            return doctor_facts.Permissions(answers=tuple(answers), error=str(err))
    return doctor_facts.Permissions(answers=tuple(answers))


class SlackDoctor:
    """`/gpu doctor`: `gpubot doctor`'s checks, run by the bot with its own credentials, for admins."""

    def __init__(
        self,
        request: Request,
        *,
        probe: ports.ClusterProbe,
        store: ports.Store,
        cloud: ports.PoolManager | None,
        chat_port: ports.Chat,
        policy: models.QuotaPolicy,
        clock: Callable[[], datetime],
        read_kueue: Callable[[], doctor_facts.KueueFacts] | None = None,
    ) -> None:
        self._read_kueue = read_kueue
        self._request = request
        self._probe, self._store, self._cloud = probe, store, cloud
        self._chat = chat_port
        self._policy = policy
        self._clock = clock

    def handle(self, actor: str, channel: str) -> list[doctor_facts.Check]:
        if not self._policy.is_admin(actor):
            refusal = "Only gpubot admins can run `/gpu doctor`; `gpubot doctor` runs the same checks."
            self._chat.ephemeral(channel, actor, notices.Ephemeral(refusal))
            return []
        facts = gather(
            self._request,
            probe=self._probe,
            store=self._store,
            cloud=self._cloud,
            clock=self._clock,
            read_kueue=self._read_kueue,
        )
        checks = doctor.run_checks(facts)
        self._chat.ephemeral(channel, actor, notices.Ephemeral(doctor.slack_report(checks)))
        return checks
