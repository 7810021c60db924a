"""Timings of the simulated world, in simulated seconds, defaulting to what real clusters do.

Each default names its source; the reference notes in docs/sim.md list them together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


def doubling(initial: float, maximum: float, count: int) -> float:
    """A back-off: `initial` doubling `count` times, capped at `maximum`. The exponent stops at 30 (past any
    cap) so a crash loop that runs for simulated weeks never computes 2**1024, which overflows a float."""
    return min(initial * float(2 ** min(max(count, 0), 30)), maximum)


@dataclass
class Timings:
    scan_interval: float = 10.0
    """Cluster Autoscaler --scan-interval."""
    gpu_pod_buffer: float = 30.0
    """CA unschedulablePodWithGpuTimeBuffer: a GPU pod must be this old before it triggers a scale-up."""
    pod_buffer: float = 2.0
    """CA unschedulablePodTimeBuffer for pods without GPUs."""
    provision_delay: float = 90.0
    """From a larger target size to the node registering NotReady (a GKE VM boot)."""
    node_ready_delay: float = 30.0
    """Registration to Ready: kubelet, CNI and the cloud node controller initialising."""
    gpu_plugin_delay: float = 120.0
    """Ready to `nvidia.com/gpu` allocatable: driver install plus the device plugin registering."""
    scale_down_unneeded: float = 600.0
    """CA --scale-down-unneeded-time."""
    scale_down_delay_after_add: float = 600.0
    """CA --scale-down-delay-after-add."""
    max_node_provision_time: float = 900.0
    """CA --max-node-provision-time: after this an unregistered node counts as a failed scale-up."""
    backoff_initial: float = 300.0
    """CA node-group backoff after a failed scale-up, doubling each time."""
    backoff_max: float = 1800.0
    """"it may wait up to 30 minutes before next attempt" (CA FAQ)."""
    event_dedupe_window: float = 300.0
    """CA dedups similar events inside 5 minutes unless --record-duplicated-events."""
    scheduler_retry: float = 60.0
    """How often unschedulable pods are retried without a cluster event (upstream flushes within 5 min)."""
    pull_small: float = 2.0
    pull_medium: float = 15.0
    pull_large: float = 90.0
    """Image pull times by size class; CUDA and framework images are the large class."""
    sigterm_exit: float = 1.0
    """How long an ordinary process takes to exit on SIGTERM; `sleep` as PID 1 ignores it."""
    pleg_relist: float = 1.0
    """kubelet PLEG relist period: how soon an exited container is noticed (and first restarted)."""
    crash_backoff_initial: float = 10.0
    crash_backoff_max: float = 300.0
    """kubelet's container restart back-off: 10 s doubling to 5 min."""
    node_lease_duration: float = 40.0
    """kubelet nodeLeaseDurationSeconds; it renews its Lease every quarter of it
    (NodeLeaseRenewIntervalFraction 0.25), so every 10 s (pkg/kubelet/kubelet.go, v1.32.4)."""
    memory_growth_rate: float = float(1 << 30)
    """Bytes per simulated second a memory-growth command allocates (1 GiB/s, the order `tail /dev/zero`
    buffers at), so a 64Mi limit is reached in 0.06 s and a 13 GiB node in 13 s."""

    # Cloud operations. Neither Google nor AWS publishes how long these take; the figures are assumptions
    # of the order public logs show (a Terraform node-pool create "Still creating... [1m30s elapsed]",
    # hashicorp/terraform-provider-google#13178; botocore's nodegroup_active waiter polls every 30 s up to
    # 80 times, botocore/data/eks/2017-11-01/waiters-2.json), kept short enough for `--speed 1`.
    gke_pool_create: float = 120.0
    """A CREATE_NODE_POOL Operation stays RUNNING this long; the pool is PROVISIONING (no nodes) meanwhile."""
    gke_pool_delete: float = 90.0
    """A DELETE_NODE_POOL Operation stays RUNNING this long; the pool is STOPPING, then gone (404)."""
    gke_pool_update: float = 30.0
    """setAutoscaling, setSize, a pool or cluster update: RUNNING this long (the change applies at once)."""
    eks_nodegroup_create: float = 180.0
    """A new managed nodegroup is CREATING (no nodes) this long, then ACTIVE."""
    eks_nodegroup_update: float = 60.0
    """An update-config is InProgress (the nodegroup UPDATING) this long, then Successful."""
    eks_nodegroup_delete: float = 120.0
    """A deleted nodegroup is DELETING this long, then ResourceNotFoundException."""


CLOUD_OPERATIONS = (
    "gke_pool_create",
    "gke_pool_delete",
    "gke_pool_update",
    "eks_nodegroup_create",
    "eks_nodegroup_update",
    "eks_nodegroup_delete",
)


def instant_cloud(timings: Timings | None = None) -> Timings:
    """Cloud operations that finish at once: for tests and benches that do not look at them."""
    return dataclasses.replace(timings or Timings(), **dict.fromkeys(CLOUD_OPERATIONS, 0.0))


@dataclass
class Faults:
    """Failure injection per pool name, and per pod for GPU metrics: what a real cloud does on a bad day."""

    stockout: set[str] = field(default_factory=set)
    """Scale-ups fail at once: GCE out of resources (FailedScaleUp on GKE, backoff)."""
    quota_exceeded: set[str] = field(default_factory=set)
    """Scale-ups fail at once: the project's GPU quota is used up (FailedScaleUp on GKE, backoff)."""
    never_register: set[str] = field(default_factory=set)
    """Instances start but never register: ScaleUpTimedOut after max_node_provision_time."""
    metrics_missing: set[str] = field(default_factory=set)
    """Pods ("namespace/name") the DCGM exporter never attributes a GPU to: they have no series."""
    metrics_stale_after: dict[str, float] = field(default_factory=dict)
    """Pods whose series stop at this simulated second, as when their exporter stops being scraped."""
