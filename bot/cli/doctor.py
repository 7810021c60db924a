"""`gpubot doctor`: pre-flight checks of the cluster, the GPU pool, the autoscaler and gpubot's own access.

Prints `PASS|WARN|FAIL|SKIP name: message` per check (a failure or warning with its fix), or a JSON list
with `--json`; exits 1 when anything fails, 2 when the command itself cannot run as typed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from bot import profiles as profiles_module
from bot import settings as settings_module
from bot.adapters import kueue as kueue_adapter
from bot.cli import pool
from bot.cli.pool import Refusal
from bot.core import doctor, doctor_facts, errors, ports
from bot.core.doctor_facts import EKS, GKE, Check, Status
from bot.services import doctor as doctor_service

FAILED, REFUSED = 1, 2


def minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes, like 15, got {text!r}") from None
    if not 0 < value <= 24 * 60:
        raise argparse.ArgumentTypeError(f"expected minutes from 0 to 1440, got {text!r}")
    return value


DESCRIPTION = """\
Check, before anyone waits for a GPU, that the cluster's GPU pool will scale from
zero for gpubot's pods and that gpubot may use it: the pool's taint and labels
against the GPU profiles, GPU advertising, the Cluster Autoscaler's health and
limits, EKS node-template tags, and the bot's own permissions. Each check prints
PASS, WARN, FAIL or SKIP with a fix; the exit status is 1 when one fails, 2 when
the checks cannot run at all.

It reads the environment `gpubot serve` reads: KUBECONFIG (or the pod's service
account), GPUBOT_NAMESPACE, GPUBOT_PROFILES_FILE, and REDIS_URL for the scale-up
times the bot has seen (none when Redis cannot be reached)."""

EPILOG = """\
examples:
  gpubot doctor
  gpubot doctor --manifest train.yaml      also: would this pod get a GPU?
  gpubot doctor --cloud gke --project my-project --location us-central1-a \\
    --cluster ml                           also see pools at 0 nodes
  gpubot doctor --json | jq '.[] | select(.status == "fail")'"""


def add_parser(sub: Any) -> None:
    found = sub.add_parser(
        "doctor",
        help="check that the GPU pool will scale from zero and gpubot may use it",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    found.add_argument(
        "--manifest",
        type=Path,
        metavar="FILE",
        help="also check this pod (or Deployment, Job) YAML file would get its GPU",
    )
    found.add_argument("--json", action="store_true", help="print the checks as a JSON list")
    found.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="NAME",
        help="check only this pool (repeatable; default: every GPU pool)",
    )
    found.add_argument(
        "--max-node-provision-time",
        type=minutes,
        default=doctor_facts.MAX_NODE_PROVISION_TIME.total_seconds() / 60,
        metavar="MINUTES",
        help="the Cluster Autoscaler's --max-node-provision-time (default: %(default)g)",
    )
    cloud = found.add_argument_group(
        "the pool's cloud",
        "Kubernetes cannot see a pool at 0 nodes; its cloud can (flags as for `gpubot pool`)",
    )
    cloud.add_argument(
        "--cloud", choices=[GKE, EKS], help="where the cluster runs (default: ask Kubernetes only)"
    )
    cloud.add_argument("--cluster", default="", help="the Kubernetes cluster's name at its cloud")
    cloud.add_argument("--project", default="", help="GKE: the Google Cloud project")
    cloud.add_argument("--location", default="", help="GKE: the cluster's zone or region")
    cloud.add_argument("--region", default="", help="EKS: the AWS region (default: AWS_REGION)")
    cloud.add_argument(
        "--endpoint",
        default="",
        metavar="URL",
        help="the cloud's APIs at this URL, e.g. a `gpubot sim`'s (default: the cloud's own)",
    )


# -- wiring ------------------------------------------------------------------------------------------


def connect_cloud(args: argparse.Namespace, found: settings_module.CloudSettings) -> ports.PoolManager | None:
    if not args.cloud:
        return None
    cloud = pool.cloud_settings(args, found)
    if not args.cluster:
        raise Refusal(f"--cloud {args.cloud} needs --cluster NAME, the cluster's name at its cloud")
    if args.cloud == GKE and not (args.project and args.location):
        raise Refusal("--cloud gke needs --project and --location as well")
    try:
        return pool.connect(args, cloud)
    except errors.GpubotError as err:
        raise Refusal(f"cannot talk to {args.cloud.upper()}: {err}") from err


def read_manifest(path: Path | None) -> doctor_facts.Manifest | None:
    if path is None:
        return None
    try:
        return doctor_facts.Manifest(str(path), path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise Refusal(f"--manifest {path}: cannot read it ({err})") from err


def build_request(args: argparse.Namespace, found: settings_module.ToolSettings) -> doctor_service.Request:
    try:
        catalog = profiles_module.read_profile_catalog(found)
        profiles, profiles_error = dict(catalog.profiles), ""
    except settings_module.SettingsError as err:
        profiles, profiles_error = {}, str(err)
    return doctor_service.Request(
        namespace=found.cluster.namespace,
        profiles=profiles,
        profiles_error=profiles_error,
        manifest=read_manifest(args.manifest),
        pools=frozenset(args.pool),
        max_node_provision_time=timedelta(minutes=args.max_node_provision_time),
        cloud=args.cloud or "",
        cluster=args.cluster,
        warm_configmap=found.warm.configmap,
        lease_name=found.leader.lease_name if found.leader.enabled else "",
    )


def run_checks(args: argparse.Namespace) -> list[Check]:
    from kubernetes.config.config_exception import ConfigException

    from bot.adapters import kube, store  # loaded by this command only, not by every `gpubot`

    found = settings_module.ToolSettings.from_env()
    request = build_request(args, found)
    cloud = connect_cloud(args, found.cloud)
    try:
        cluster = kube.connect(found.cluster)
    except (ConfigException, OSError) as err:
        raise Refusal(f"cannot load the cluster's credentials: {err}") from err
    kept = store.open_store(found.redis.url, prefix=found.redis.key_prefix)
    try:
        facts = doctor_service.gather(
            request,
            probe=cluster,
            store=kept,
            cloud=cloud,
            clock=lambda: datetime.now(UTC),
            read_kueue=kueue_adapter.KueueWatch(cluster).read_facts,
        )
    finally:
        kept.close()
        cluster.api.close()  # type: ignore[no-untyped-call]
    return doctor.run_checks(facts)


# -- output ------------------------------------------------------------------------------------------


def render_text(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"{check.status.name} {check.name}: {check.message}")
        if check.fix and check.status in (Status.FAIL, Status.WARN):
            lines.append(f"  fix: {check.fix}")
    lines.append(doctor.summary(checks))
    return "\n".join(lines)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # looked up per call, so a redirected stdout is honoured
    logging.getLogger().setLevel(logging.WARNING)  # the report is the output; INFO logs would drown it
    try:
        checks = run_checks(args)
    except (Refusal, settings_module.SettingsError) as err:
        print(f"gpubot doctor: {err}", file=sys.stderr)
        return REFUSED
    if args.json:
        out.write(json.dumps([c.as_json() for c in checks], indent=2) + "\n")
    else:
        out.write(render_text(checks) + "\n")
    return FAILED if any(c.status is Status.FAIL for c in checks) else 0
