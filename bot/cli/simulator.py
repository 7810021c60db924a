"""`gpubot sim`: the embedded cluster on its own, for kubectl, gcloud, `gpubot pool` and `gpubot doctor`.

Like `gpubot demo`, it imports the simulator only when it runs, so `gpubot serve` never loads it.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

DEFAULT_KUBECONFIG = Path.home() / ".gpubot" / "sim" / "kubeconfig"


def parse_listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


SIM_DESCRIPTION = """\
Run a local cluster that behaves like GKE with the Cluster Autoscaler: two CPU
nodes, and a GPU pool at 0 nodes that grows when a GPU pod waits and shrinks back
when it is idle. kubectl, gcloud, `gpubot pool` and `gpubot doctor` work against
it unmodified; at start it prints the exact commands and environment they need.
Ctrl-C stops it. docs/sim.md has the details."""

SIM_EPILOG = """\
examples:
  gpubot sim                          real time; a scale-up from zero takes ~6 minutes
  gpubot sim --speed 60               a minute a second: the same in ~6 seconds
  gpubot sim --no-gpu-pool --listen 127.0.0.1:7443
                                      create the GPU pool yourself, on another port"""


def add_parser(sub: Any) -> None:
    sim_cmd = sub.add_parser(
        "sim",
        help="run a local GPU cluster that scales from zero, for kubectl, gcloud and gpubot",
        description=SIM_DESCRIPTION,
        epilog=SIM_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim_cmd.add_argument(
        "--listen",
        type=parse_listen,
        default=("127.0.0.1", 6443),
        metavar="HOST:PORT",
        help="where its Kubernetes, GKE, EKS and Prometheus APIs answer; loopback only "
        "(default: 127.0.0.1:6443)",
    )
    sim_cmd.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="simulated seconds per real second: 60 is a minute a second; 0 stops the clock, "
        "which then moves only by POST /simctl/v1/clock/advance (default: %(default)g)",
    )
    sim_cmd.add_argument(
        "--kubeconfig",
        type=Path,
        default=DEFAULT_KUBECONFIG,
        metavar="PATH",
        help="write a kubeconfig for kubectl and gpubot here (default: ~/.gpubot/sim/kubeconfig)",
    )
    sim_cmd.add_argument(
        "--no-gpu-pool",
        action="store_true",
        help="start without the GPU pool, to create it yourself as the tutorial does "
        "(gcloud container node-pools create, or gpubot pool create)",
    )
    sim_cmd.add_argument(
        "--instant-cloud",
        action="store_true",
        help="GKE operations and EKS nodegroup changes finish at once (default: they take minutes of "
        "simulated time, as at the clouds: a node pool is PROVISIONING for 2 minutes)",
    )
    sim_cmd.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the cluster (objects, pools, clock) in DIR across restarts (default: start afresh)",
    )
    sim_cmd.add_argument(
        "--kueue-gpu-quota",
        type=int,
        default=None,
        metavar="N",
        help="install a minimal Kueue v0.19.2 with a ClusterQueue of N GPUs and the LocalQueue gpu-queue "
        "in gpubot-workloads (default: no Kueue)",
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(serve_cluster(args))


async def serve_cluster(args: argparse.Namespace) -> int:
    from sim.cluster import config as config_module
    from sim.cluster import world

    host, port = args.listen
    if host not in ("127.0.0.1", "localhost", "::1"):
        print("gpubot sim serves loopback only; use 127.0.0.1", file=sys.stderr)
        return 2
    config = world.WorldConfig(
        host=host,
        port=port,
        speed=args.speed or None,
        gpu_pool=not args.no_gpu_pool,
        state_dir=args.state_dir,
        kueue_gpu_quota=args.kueue_gpu_quota,
        timings=config_module.instant_cloud() if args.instant_cloud else config_module.Timings(),
    )
    cluster = world.World(config)
    await cluster.start()
    world.write_kubeconfig(args.kubeconfig, cluster.url)
    print(sim_instructions(cluster.url, args.kubeconfig.absolute(), gpu_pool=config.gpu_pool), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("\nstopping the simulated cluster", flush=True)
    await cluster.stop()
    return 0


def sim_instructions(url: str, kubeconfig: Path, *, gpu_pool: bool) -> str:
    """What `gpubot sim` prints at start: every command as typed, working against this cluster as is.

    Only environment variables point the tools here, so a user's own kubeconfig and gcloud configuration
    keep their settings; tests/sim/test_cli.py runs each command exactly as printed."""
    from sim.cluster import world

    place = f"project {world.PROJECT}, location {world.LOCATION}"
    where = f"--cloud gke --project {world.PROJECT} --location {world.LOCATION} --cluster {world.CLUSTER}"
    kube_env = f"KUBECONFIG={shlex.quote(str(kubeconfig))}"
    create = [] if gpu_pool else [f"gpubot pool create {where} --max 5  # the GPU pool you left out"]
    after_scan = "" if gpu_pool else "  # once the autoscaler has scanned the new pool (10 s)"
    gcloud_env = (
        f"CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER={url}/ CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true "
        f"CLOUDSDK_CORE_PROJECT={world.PROJECT}"
    )
    lines = [
        f"gpubot sim: embedded GKE cluster '{world.CLUSTER}' ({place})",
        f"  API server  {url}  (Kubernetes, GKE, EKS, EC2 Auto Scaling and Prometheus APIs)",
        f"  kubeconfig  {kubeconfig}",
        "",
        "kubectl:",
        f"  export {kube_env}",
        "  kubectl get nodes",
        "",
        "gpubot pool and gpubot doctor:",
        f"  export {kube_env} GPUBOT_GKE_ENDPOINT={url}",
        *(f"  {line}" for line in create),
        f"  gpubot pool show {where}",
        f"  gpubot doctor {where}{after_scan}",
        "",
        "gcloud (variables override your gcloud configuration, in this shell only):",
        f"  export {gcloud_env}",
        f"  gcloud container node-pools list --cluster {world.CLUSTER} --location {world.LOCATION}",
        "",
        f"boto3 EKS: endpoint_url={url}, region_name={world.EKS_REGION}, cluster '{world.CLUSTER}'",
        "Ctrl-C stops it.",
    ]
    return "\n".join(lines)
