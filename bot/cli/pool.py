"""`gpubot pool create|show|set|delete`: the scale-from-zero GPU pool on GKE or EKS, made from a profile.

What a correct pool is, and what is wrong with one, comes from `bot.core.pools`; this module parses
flags, picks the cloud's adapter and prints. Input is checked in full before any call that changes
something, so a refused command (exit 2) leaves the cloud as it was. Changes take minutes at the cloud:
their progress goes to stderr, and a wait that times out or is interrupted says how to follow the change
there (exit 1, and 130 on Ctrl-C).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from bot import profiles
from bot.core import errors, operations, pools, ports
from bot.settings import CloudSettings, SettingsError, ToolSettings

REFUSED, FAILED, INTERRUPTED = 2, 1, 130
"""Exit codes: 2 when gpubot or the cloud refused the input (nothing changed), 1 when the cloud failed or
the wait timed out, 130 on Ctrl-C (the shell's code for SIGINT)."""
PROGRESS_EVERY = 30.0
"""Seconds between two progress lines while the cloud's state stays the same."""


class Progress:
    """`operations.Watch` for a person at a terminal: a line on the first look, on each new state, and every
    30 s between, with the time waited so far; the last look says what to check after a Ctrl-C."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.started = time.monotonic()
        self.last: operations.Pending | None = None
        self.printed_at = -math.inf

    def __call__(self, pending: operations.Pending) -> None:
        now = time.monotonic()
        changed = self.last is None or pending.state != self.last.state
        self.last = pending  # before printing: a Ctrl-C right after the line still knows the change
        if changed or now - self.printed_at >= PROGRESS_EVERY:
            self.printed_at = now
            print(operations.progress_line(pending, now - self.started), file=self.err, flush=True)

    def finish(self) -> None:
        """`done in …`, only after a change that was waited for."""
        if self.last is not None:
            last, elapsed = self.last, time.monotonic() - self.started
            line = operations.done_line(last.change, last.cloud, last.pool, elapsed)
            print(line, file=self.err, flush=True)


class Refusal(Exception):
    """The command cannot run as typed; the message says what to type instead."""


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


POOL_DESCRIPTION = """\
Create, show, resize or delete the GPU node pool (GKE) or nodegroup (EKS) that
scales from zero, made from a GPU profile so its taint, labels and GPUs match the
pods the bot creates. Everything is checked before anything changes: exit 2 means
refused with nothing changed, 1 that the cloud failed.

create, set and delete wait for the cloud (minutes), with progress on stderr. Past
GPUBOT_CLOUD_TIMEOUT_SECONDS (default 1800), or on Ctrl-C (exit 130), they stop
waiting and print the gcloud or aws command that follows the change, which carries
on at the cloud; a change the cloud gave up on exits 1 with its reason."""

POOL_EPILOG = """\
examples:
  gpubot pool create --cloud gke --project my-project --location us-central1-a \\
    --cluster ml --max 5
  gpubot pool create --cloud eks --region us-east-1 --cluster ml --max 5 \\
    --node-role arn:aws:iam::123456789012:role/eks-node --subnets subnet-1,subnet-2
  gpubot pool show --cloud gke --project demo --location local-a --cluster demo \\
    --endpoint http://127.0.0.1:6443        (a `gpubot sim`)

Credentials are the clouds' own: gcloud's application default credentials, and
boto3's (AWS_PROFILE, AWS_REGION, ~/.aws). GPUBOT_PROFILES_FILE names the GPU
profiles (default: the built-in t4)."""


def add_parser(sub: Any) -> None:
    """The `pool` subcommand and its four actions, on `gpubot`'s subparsers."""
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--cloud", choices=[c.value for c in pools.Cloud], required=True, help="where the cluster runs"
    )
    where.add_argument("--cluster", required=True, help="the Kubernetes cluster's name at its cloud")
    where.add_argument(
        "--name", default="gpu-pool", help="the pool (GKE) or nodegroup (EKS) (default: %(default)s)"
    )
    where.add_argument("--project", help="GKE: the Google Cloud project")
    where.add_argument("--location", help="GKE: the cluster's zone or region")
    where.add_argument("--region", help="EKS: the AWS region (default: AWS_REGION)")
    where.add_argument(
        "--endpoint",
        metavar="URL",
        help="the cloud's APIs at this URL, e.g. a `gpubot sim`'s (default: the cloud's own)",
    )
    pool = sub.add_parser(
        "pool",
        help="create, show, resize or delete the scale-from-zero GPU pool",
        description=POOL_DESCRIPTION,
        epilog=POOL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = pool.add_subparsers(dest="pool_command", required=True, metavar="ACTION", title="actions")

    create = actions.add_parser(
        "create",
        parents=[where],
        help="create the pool for a GPU profile",
        description="Create the pool for a GPU profile: autoscaled from --min to --max nodes, tainted "
        "so only GPU pods land there, labelled as the profile's pods select, and on EKS tagged so the "
        "Cluster Autoscaler can scale it up from zero.",
    )
    create.add_argument("--profile", help="a GPU profile (default: the profiles file's default)")
    create.add_argument(
        "--max", dest="max_size", type=whole_number, required=True, metavar="N", help="the most nodes"
    )
    create.add_argument(
        "--min",
        dest="min_size",
        type=whole_number,
        default=0,
        metavar="N",
        help="nodes kept even when idle (default: 0, so an idle pool costs nothing)",
    )
    create.add_argument(
        "--machine-type",
        "--instance-type",
        default="",
        help="the node's machine (GKE) or instance (EKS) type (default: the usual one for the GPU)",
    )
    create.add_argument(
        "--gpus",
        type=whole_number,
        metavar="N",
        help="GPUs per node (default: what the machine type comes with, else the profile's maxCount)",
    )
    create.add_argument("--node-role", default="", metavar="ARN", help="EKS: the nodes' IAM role ARN")
    create.add_argument(
        "--subnets", type=comma_list, default=(), metavar="IDS", help="EKS: subnet ids, comma-separated"
    )

    show = actions.add_parser(
        "show",
        parents=[where],
        help="print the pool and what is wrong with it",
        description="Print the pool (size, autoscaling, machine, GPUs, taints, labels) and every "
        "problem that would keep it from scaling from zero for gpubot's pods.",
    )
    show.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="count the pool's nodes in this cluster, since GKE does not say (default: KUBECONFIG)",
    )

    resize = actions.add_parser(
        "set",
        parents=[where],
        help="change the pool's min and max size",
        description="Change how far the autoscaler may shrink and grow the pool.",
    )
    resize.add_argument(
        "--min", dest="min_size", type=whole_number, metavar="N", help="the fewest nodes (default: as now)"
    )
    resize.add_argument(
        "--max", dest="max_size", type=whole_number, metavar="N", help="the most nodes (default: as now)"
    )

    delete = actions.add_parser(
        "delete",
        parents=[where],
        help="delete the pool and its nodes",
        description="Delete the pool and every node in it; asks you to type its name unless --yes.",
    )
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")


# -- wiring ----------------------------------------------------------------------------------------


def cloud_settings(args: argparse.Namespace, found: CloudSettings) -> CloudSettings:
    """Flags win over the environment; `--endpoint` serves every API of the cloud (the sim has one URL)."""
    endpoint = (args.endpoint or "").rstrip("/")
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise Refusal(f"--endpoint {args.endpoint!r}: expected an http(s) URL")
    if endpoint:
        found = dataclasses.replace(
            found, gke_endpoint=endpoint, eks_endpoint=endpoint, autoscaling_endpoint=endpoint
        )
    return dataclasses.replace(found, aws_region=args.region) if args.region else found


def place(args: argparse.Namespace) -> str:
    if args.cloud == pools.Cloud.GKE.value:
        if not args.project or not args.location:
            raise Refusal("--cloud gke needs --project and --location (the cluster's zone or region)")
        return f"projects/{args.project}/locations/{args.location}/clusters/{args.cluster}"
    return f"EKS cluster {args.cluster}" + (f" ({args.region})" if args.region else "")


def connect(args: argparse.Namespace, cloud: CloudSettings) -> ports.PoolManager:
    """Each cloud's SDK is imported only when that cloud is asked for."""
    if args.cloud == pools.Cloud.GKE.value:
        from bot.adapters import gke

        return gke.GkePools.connect(cloud, project=args.project, location=args.location, cluster=args.cluster)
    from bot.adapters import eks

    return eks.EksPools.connect(cloud, cluster=args.cluster)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Exit 0 when done; 2 when refused with nothing changed; 1 when the cloud failed."""
    out, err = out or sys.stdout, err or sys.stderr  # read at call time, so redirected streams are used
    action, where = ACTIONS[args.pool_command], args.cluster
    progress = Progress(err)
    try:
        tools = ToolSettings.from_env()
        where = place(args)
        manager = connect(args, cloud_settings(args, tools.cloud))
        return action(manager, args, tools, out, progress)
    except KeyboardInterrupt:
        if progress.last is not None:
            print(f"gpubot pool: {operations.interrupted_text(progress.last)}", file=err)
        else:
            hint = f"see what reached the cloud with `{show_command(args)}`"
            print(f"gpubot pool: interrupted; {hint}", file=err)
        return INTERRUPTED
    except (errors.StillRunning, errors.OperationFailed) as failure:
        print(f"gpubot pool: {failure}", file=err)
        return FAILED
    except (Refusal, SettingsError) as refusal:
        print(f"gpubot pool: {refusal}", file=err)
        return REFUSED
    except errors.NotFound:
        print(f"gpubot pool: there is no pool {args.name} in {where}", file=err)
        return REFUSED
    except errors.Conflict:
        print(f"gpubot pool: {args.name} already exists in {where}; nothing changed", file=err)
        return REFUSED
    except errors.Invalid as invalid:
        print(f"gpubot pool: the cloud refused: {invalid.message}", file=err)
        return REFUSED
    except errors.GpubotError as failure:
        print(f"gpubot pool: {type(failure).__name__}: {failure}", file=err)
        return FAILED


# -- actions ---------------------------------------------------------------------------------------


def show_command(args: argparse.Namespace) -> str:
    where = [f"--cloud {args.cloud}", f"--cluster {args.cluster}", f"--name {args.name}"]
    for flag in ("project", "location", "region"):
        if getattr(args, flag):
            where.append(f"--{flag} {getattr(args, flag)}")
    return "gpubot pool show " + " ".join(where)


def create(
    manager: ports.PoolManager, args: argparse.Namespace, tools: ToolSettings, out: TextIO, progress: Progress
) -> int:
    catalog = profiles.read_profile_catalog(tools)
    name = args.profile or catalog.default
    if name not in catalog.profiles:
        raise Refusal(f"unknown profile {name!r}; known: {', '.join(sorted(catalog.profiles))}")
    request = pools.PoolRequest(
        cloud=pools.Cloud(args.cloud),
        name=args.name,
        cluster=args.cluster,
        profile=catalog.profiles[name],
        max_size=args.max_size,
        min_size=args.min_size,
        machine_type=args.machine_type,
        gpus_per_node=args.gpus,
        node_role=args.node_role,
        subnets=args.subnets,
    )
    spec = pools.plan_pool(request)
    if isinstance(spec, pools.Refused):
        raise Refusal(spec.reason)
    created = manager.create_pool(spec, watch=progress)
    progress.finish()
    print(f"created {args.name} for profile {name}", file=out)
    print_pool(created, out)
    return 0


def show(
    manager: ports.PoolManager, args: argparse.Namespace, tools: ToolSettings, out: TextIO, progress: Progress
) -> int:
    pool = manager.get_pool(args.name)
    kubeconfig = args.kubeconfig or tools.cluster.kubeconfig
    nodes = count_nodes(kubeconfig, tools, args.name) if pool.current_size is None and kubeconfig else None
    print_pool(pool, out, nodes=nodes)
    return 0


def resize(
    manager: ports.PoolManager, args: argparse.Namespace, tools: ToolSettings, out: TextIO, progress: Progress
) -> int:
    planned = pools.plan_resize(manager.get_pool(args.name), min_size=args.min_size, max_size=args.max_size)
    if isinstance(planned, pools.Refused):
        raise Refusal(planned.reason)
    resized = manager.set_pool_size(args.name, planned, watch=progress)
    progress.finish()
    print(f"{args.name} now scales between {planned.min_size} and {planned.max_size} nodes", file=out)
    print_pool(resized, out)
    return 0


def delete(
    manager: ports.PoolManager, args: argparse.Namespace, tools: ToolSettings, out: TextIO, progress: Progress
) -> int:
    pool = manager.get_pool(args.name)
    if not args.yes:
        if not sys.stdin.isatty():
            raise Refusal(f"deleting {args.name} needs --yes when not run from a terminal")
        answer = input(
            f"Delete {pool.cloud.value.upper()} pool {args.name} and all its nodes? Type its name: "
        )
        if answer.strip() != args.name:
            raise Refusal("not confirmed; nothing deleted")
    manager.delete_pool(args.name, watch=progress)
    progress.finish()
    print(f"deleted {args.name}", file=out)
    return 0


Action = Callable[[ports.PoolManager, argparse.Namespace, ToolSettings, TextIO, Progress], int]
ACTIONS: dict[str, Action] = {"create": create, "show": show, "set": resize, "delete": delete}


# -- output ----------------------------------------------------------------------------------------


def count_nodes(kubeconfig: str, tools: ToolSettings, pool: str) -> int | str:
    """The pool's nodes as Kubernetes lists them, or why they could not be counted."""
    from bot.adapters import kube  # only `show` on GKE with a kubeconfig needs the cluster

    try:
        cluster = kube.connect(dataclasses.replace(tools.cluster, kubeconfig=kubeconfig, in_cluster=False))
        return sum(1 for node in cluster.list_nodes() if node.pool == pool)
    except (errors.GpubotError, OSError, ValueError) as failure:  # kubeconfig unreadable or cluster down
        return f"unknown ({failure})"


def size_text(pool: pools.PoolView, nodes: int | str | None) -> str:
    if pool.current_size is not None:
        return f"{pool.current_size} node(s)"
    if isinstance(nodes, int):
        return f"{nodes} node(s) in Kubernetes"
    return nodes or "unknown: the GKE API does not say; pass --kubeconfig to count the nodes"


def print_pool(pool: pools.PoolView, out: TextIO, *, nodes: int | str | None = None) -> None:
    gpus = "unknown" if pool.accelerator_count is None else str(pool.accelerator_count)
    rows = [
        ("status", pools.status_text(pool)),
        ("autoscaling", f"{'on' if pool.autoscaling else 'off'}, min {pool.min_size}, max {pool.max_size}"),
        ("current size", size_text(pool, nodes)),
        ("machine", pool.machine_type + (f" ({pool.ami_type})" if pool.ami_type else "")),
        ("accelerator", f"{gpus} x {pool.accelerator_type or 'none'} per node"),
        ("taints", ", ".join(str(t) for t in pool.taints) or "none"),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(pool.labels.items())) or "none"),
    ]
    if pool.asg_tags is not None:
        rows.append(("ASG", pool.asg_name or "none yet"))
        rows += [("", f"{k}={v}") for k, v in sorted(pool.asg_tags.items())]
    print(f"{pool.cloud.value.upper()} pool {pool.name} in cluster {pool.cluster}", file=out)
    for label, value in rows:
        print(f"  {label:<13} {value}", file=out)
    found = pools.problems(pool)
    print("problems: none" if not found else "problems:", file=out)
    for problem in found:
        print(f"  - {problem}", file=out)
