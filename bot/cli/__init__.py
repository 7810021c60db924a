"""The `gpubot` command: the one module allowed to start both the product and the embedded defaults."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from bot.cli import doctor, pool
from bot.settings import Settings, SettingsError

DEFAULT_KUBECONFIG = Path.home() / ".gpubot" / "sim" / "kubeconfig"
RAW = argparse.RawDescriptionHelpFormatter
"""Descriptions and examples keep their lines; option help is still wrapped to the terminal."""


def parse_listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


DESCRIPTION = """\
gpubot hands out GPUs from a Kubernetes node pool that scales from zero, through
Slack: people type `/gpu run IMAGE -- COMMAND`, the pool grows a node, their thread
follows the pod, and the bot takes the GPU back when the lease ends or it sits idle."""

EPILOG = """\
start here (no cloud, no Slack):
  gpubot demo                  the bot, a GPU cluster and Slack play a story (~1 min)
  gpubot demo --interactive    type the /gpu commands yourself
  gpubot sim                   a local GPU cluster for kubectl, gcloud, pool and doctor

on a real cluster:
  gpubot pool create ...       make the scale-from-zero GPU pool right
  gpubot doctor                check it before anyone waits for a GPU
  gpubot serve                 run the bot (docs/deploy.md)

`gpubot COMMAND --help` says more about each command."""

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

DEMO_DESCRIPTION = """\
Play a scripted story in about a minute, with nothing to set up: the real bot, a
GPU cluster and a Slack emulator, all in this process. alice asks for a GPU and
the pool scales from zero; bob finds it full; the reaper warns about an idle GPU,
reminds before a lease ends and deletes what nobody extends; the pool drains back
to 0. The Slack transcript is printed as it happens, stamped with simulated time."""

DEMO_EPILOG = """\
examples:
  gpubot demo                          the story with the bot
  gpubot demo --interactive            you type: `/gpu run ...`, `wait 3m`, `buttons`, `click 1`
  printf '/gpu status\\n' | gpubot demo --interactive
  gpubot demo --cluster --speed 120    the seed tutorial on the cluster alone"""

SERVE_DESCRIPTION = """\
Run the bot: it answers /gpu in Slack, creates and follows GPU pods in the
cluster, and reaps the forgotten ones. It reads everything from the environment
(docs/deploy.md lists every variable) and runs until SIGTERM or Ctrl-C. Settings
it cannot start with are named in one line, and it exits 2."""

SERVE_EPILOG = """\
environment (the essentials):
  SLACK_BOT_TOKEN       the bot token, xoxb-…, from your Slack app's
                        OAuth & Permissions page
  SLACK_APP_TOKEN       the app-level token, xapp-…, from its Basic Information
                        page, for Socket Mode (the default: no public URL needed)
  SLACK_MODE=http       take Slack's requests over HTTP on PORT (default 3000)
                        instead; needs SLACK_SIGNING_SECRET
  KUBECONFIG            the cluster (default: ~/.kube/config, or the pod's service
                        account when running inside Kubernetes)
  GPUBOT_NAMESPACE      where the bot creates its pods (default: gpubot-workloads)
  REDIS_URL             its small shared state (default: redis://localhost:6379/0;
                        memory:// keeps it in the process, for one replica)
  GPUBOT_SCALE_CHANNEL  a channel id for one message per scale-up episode

example, a first run from a laptop (without Slack, try `gpubot demo`):
  export SLACK_BOT_TOKEN=xoxb-… SLACK_APP_TOKEN=xapp-… REDIS_URL=memory://
  gpubot serve"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpubot", description=DESCRIPTION, epilog=EPILOG, formatter_class=RAW
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    add_sim_parser(sub)
    add_demo_parser(sub)
    sub.add_parser(
        "serve",
        help="run the bot against Slack and the cluster its environment names",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=RAW,
    )
    pool.add_parser(sub)
    doctor.add_parser(sub)
    return parser


def add_sim_parser(sub: Any) -> None:
    sim_cmd = sub.add_parser(
        "sim",
        help="run a local GPU cluster that scales from zero, for kubectl, gcloud and gpubot",
        description=SIM_DESCRIPTION,
        epilog=SIM_EPILOG,
        formatter_class=RAW,
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


def add_demo_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="watch the bot, a GPU cluster and Slack play a story; nothing to set up",
        description=DEMO_DESCRIPTION,
        epilog=DEMO_EPILOG,
        formatter_class=RAW,
    )
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument(
        "--interactive",
        action="store_true",
        help="you type the /gpu commands, press the buttons and move the clock, at a prompt",
    )
    mode.add_argument(
        "--cluster",
        action="store_true",
        help="narrate the seed tutorial on the cluster alone, without the bot or Slack: "
        "the GPU pool is created through the GKE API and a pod scales it from zero",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=60.0,
        metavar="FACTOR",
        help="with --cluster: simulated seconds per real second (default: %(default)g)",
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet = args.command in ("demo", "pool")  # their output is for people; logs would drown it
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command in ("sim", "demo") and importlib.util.find_spec("sim") is None:
        # The production image leaves the simulator out (Dockerfile); an install from the repository has it.
        missing = f"gpubot {args.command}: this install has no simulator; `pip install .` from the repository"
        print(missing, file=sys.stderr)
        return 2
    if args.command == "sim":
        return asyncio.run(run_sim(args))
    if args.command == "demo" and args.cluster:
        from sim import seed  # the simulator loads for `sim` and `demo` only, never into `serve`

        return seed.run_demo(speed=args.speed, out=sys.stdout)
    if args.command == "demo" and args.interactive:
        from bot.cli import interactive  # like the story, needs the bot's Slack and Kubernetes clients

        return interactive.play_interactive(sys.stdin, sys.stdout)
    if args.command == "demo":
        from bot.cli import demo  # the bot's Slack and Kubernetes clients, needed by this command only

        return demo.play_story(sys.stdout)
    if args.command == "pool":
        return pool.run(args)
    if args.command == "doctor":
        return doctor.run(args)
    if args.command == "serve":
        return serve()
    return 2


def serve() -> int:
    """`gpubot serve`; settings it cannot start with are one line naming the variables, and exit 2."""
    from bot import app  # only `serve` needs Slack and Kubernetes clients

    try:
        return app.serve(Settings.from_env())
    except SettingsError as err:
        print(f"gpubot serve: {err.one_line()}; see docs/deploy.md", file=sys.stderr)
        return 2


async def run_sim(args: argparse.Namespace) -> int:
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
