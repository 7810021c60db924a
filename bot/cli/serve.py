"""`gpubot serve`: the bot itself, configured from the environment (docs/deploy.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.settings import Settings, SettingsError

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


def add_parser(sub: Any) -> None:
    sub.add_parser(
        "serve",
        help="run the bot against Slack and the cluster its environment names",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def run(args: argparse.Namespace) -> int:
    """`gpubot serve`; settings it cannot start with are one line naming the variables, and exit 2."""
    from bot import app  # only `serve` needs Slack and Kubernetes clients

    try:
        return app.serve(Settings.from_env())
    except SettingsError as err:
        print(f"gpubot serve: {err.one_line()}; see docs/deploy.md", file=sys.stderr)
        return 2
