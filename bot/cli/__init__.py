"""The `gpubot` command: one module per subcommand, the only package allowed to start both the product and
the embedded defaults (the simulator loads for `gpubot sim` and `gpubot demo` only)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from typing import Any

from bot.cli import doctor, pool, serve, simulator

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpubot",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    simulator.add_parser(sub)
    add_demo_parser(sub)
    serve.add_parser(sub)
    pool.add_parser(sub)
    doctor.add_parser(sub)
    return parser


def add_demo_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="watch the bot, a GPU cluster and Slack play a story; nothing to set up",
        description=DEMO_DESCRIPTION,
        epilog=DEMO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        return simulator.run(args)
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
        return serve.run(args)
    return 2
