"""The `gpubot` command: the one module allowed to start both the product and the embedded defaults."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from bot import cli_doctor, cli_pool
from bot.settings import Settings, SettingsError

DEFAULT_KUBECONFIG = Path.home() / ".gpubot" / "sim" / "kubeconfig"


def parse_listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpubot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim_cmd = sub.add_parser("sim", help="run the embedded GPU cluster that scales from zero")
    sim_cmd.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 6443), metavar="HOST:PORT")
    sim_cmd.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="simulated seconds per real second (60: a minute a second; 0: manual clock)",
    )
    sim_cmd.add_argument("--kubeconfig", type=Path, default=DEFAULT_KUBECONFIG)
    sim_cmd.add_argument(
        "--no-gpu-pool", action="store_true", help="leave the GPU pool to be created via GKE API"
    )
    sim_cmd.add_argument("--state-dir", type=Path, default=None, help="keep the cluster across restarts here")
    demo = sub.add_parser(
        "demo", help="play the story with the bot on the embedded cluster and Slack emulator"
    )
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument(
        "--cluster", action="store_true", help="instead, narrate the seed tutorial on the cluster alone"
    )
    demo.add_argument(
        "--speed", type=float, default=60.0, help="with --cluster: simulated seconds per second"
    )
    mode.add_argument(
        "--interactive",
        action="store_true",
        help="instead, type the /gpu commands, press the buttons and move the clock yourself",
    )
    sub.add_parser("serve", help="run the bot against Slack and the cluster its environment names")
    cli_pool.add_parser(sub)
    cli_doctor.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet = args.command in ("demo", "pool")  # their output is for people; logs would drown it
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "sim":
        return asyncio.run(run_sim(args))
    if args.command == "demo" and args.cluster:
        from sim import seed  # the simulator loads for `sim` and `demo` only, never into `serve`

        return seed.run_demo(speed=args.speed, out=sys.stdout)
    if args.command == "demo" and args.interactive:
        from bot import cli_interactive  # like the story, needs the bot's Slack and Kubernetes clients

        return cli_interactive.play_interactive(sys.stdin, sys.stdout)
    if args.command == "demo":
        from bot import cli_demo  # the bot's Slack and Kubernetes clients, needed by this command only

        return cli_demo.play_story(sys.stdout)
    if args.command == "pool":
        return cli_pool.run(args)
    if args.command == "doctor":
        return cli_doctor.run(args)
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
    from sim import seed
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
    )
    cluster = world.World(config)
    await cluster.start()
    world.write_kubeconfig(args.kubeconfig, cluster.url)
    print(seed.instructions(cluster.url, args.kubeconfig), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("\nstopping the simulated cluster", flush=True)
    await cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
