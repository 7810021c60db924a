"""The bench's stage: the embedded cluster, the Slack emulator, a private Redis, and `gpubot serve` running.

The bot runs as its own OS process, as it does in production: its memory is its own, and its threads do not
share a GIL with the sim and the emulator, which run here on their own event-loop threads. The bench's own
Kubernetes clients name themselves in User-Agent, so the sim's traffic counts tell their requests from the
bot's (the official client's default agent, `OpenAPI-Generator/…`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from bot.testing import stages
from sim.cluster import world
from sim.slack.emulator import SlackConfig

T = TypeVar("T")
Json = dict[str, Any]

BOT_AGENT_PREFIX = "OpenAPI-Generator/"
"""The official client's default User-Agent, which the bot keeps."""
WATCHED = frozenset({"pods", "events", "nodes"})
"""What the bot's informers watch; other writes (the autoscaler's status, the Lease) are no news to it."""
STARTUP_SECONDS = 90.0
"""Real seconds for the bot to import, sync, take the Lease and connect; reached only when broken."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def kube_api(url: str, agent: str) -> client.ApiClient:
    """A client of the bench's own, named `agent` in every request it sends."""
    api = client.ApiClient(client.Configuration(host=url))
    api.user_agent = agent
    return api


def wait_for(predicate: Callable[[], T | None], *, timeout: float, what: str, every: float = 0.05) -> T:
    """Poll something another process or thread makes true; the bench's only kind of wait."""
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached within {timeout:g} s")
        time.sleep(every)
    return found


Stage = stages.Stage
"""The shared harness's stage (bot/testing): the sim, the emulator, a private Redis and a directory."""


def stage(
    world_config: world.WorldConfig, slack_config: SlackConfig
) -> contextlib.AbstractContextManager[Stage]:
    return stages.stage(world_config, slack_config, prefix="gpubot-bench-")


# -- the bot as a process ------------------------------------------------------------------------


def serve_command() -> list[str]:
    """`gpubot serve`, through the console script the package installs next to this interpreter."""
    script = Path(sys.executable).with_name("gpubot")
    if script.exists():
        return [str(script), "serve"]
    found = shutil.which("gpubot")
    return [found, "serve"] if found else [sys.executable, "-m", "bot.cli", "serve"]


class Process:
    """One OS process with its output in a log file; SIGTERM on close."""

    def __init__(self, command: list[str], env: Mapping[str, str], log: Path) -> None:
        self.command, self.env, self.log = command, dict(env), log
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as output:
            self._process = subprocess.Popen(
                self.command, env=self.env, stdout=output, stderr=subprocess.STDOUT, cwd=Path.cwd()
            )
        atexit.register(self.kill)  # a bench that dies on the way leaves no bot behind

    def kill(self) -> None:
        if self.alive:
            assert self._process is not None
            self._process.kill()
            self._process.wait()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        if not self.alive:
            return
        assert self._process is not None
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def memory(self) -> dict[str, int]:
        """VmRSS (now) and VmHWM (peak) in bytes, as the kernel counts the process's resident memory."""
        found = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(rest.split()[0]) * 1024
        return found


class BotProcess(Process):
    """`gpubot serve` pointed at the stage; its /metrics answers on `health_port`."""

    def __init__(self, stage: Stage, *, name: str = "bot", **env: str) -> None:
        self.health_port = free_port()
        settings = stages.serve_environment(
            stage,
            GPUBOT_HEALTH_PORT=str(self.health_port),
            GPUBOT_MAX_GPUS_PER_USER="8",
            POD_NAME=f"gpubot-{name}",
        )  # in the sim's unlabelled namespace `default`, where the stages count pods
        super().__init__(serve_command(), settings | env, stage.directory / f"{name}.log")

    def start_and_wait(self, stage: Stage) -> None:
        """Start, and wait until it is ready (informers synced, Socket Mode connected) and leading."""
        before = stage.slack.connections()
        self.start()
        try:
            wait_for(self.ready, timeout=STARTUP_SECONDS, what="the bot's /readyz", every=0.1)
            wait_for(self.leading, timeout=STARTUP_SECONDS, what="the bot leading", every=0.1)
            wait_for(lambda: stage.slack.connections() > before, timeout=STARTUP_SECONDS, what="Socket Mode")
        except TimeoutError as err:
            raise RuntimeError(f"{err}\n{self.tail()}") from None

    def ready(self) -> bool:
        if not self.alive:
            raise RuntimeError(f"the bot exited:\n{self.tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def leading(self) -> bool:
        return self.metric("gpubot_leader") == 1

    def metric(self, name: str) -> float | None:
        """One unlabelled sample from the bot's /metrics, or None if it is not there (yet)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/metrics", timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return float(value)
        return None


class ScriptProcess(Process):
    """A bench module as its own process (the bare Bolt baseline), with the Slack environment the bot gets."""

    def __init__(self, stage: Stage, module: str, *, name: str, **env: str) -> None:
        settings = stages.inherited_environment() | {
            "SLACK_BOT_TOKEN": stage.slack.bot_token,
            "SLACK_APP_TOKEN": stage.slack.app_token,
            "SLACK_API_URL": stage.slack.api_url,
            "SKIP_SLACK_SDK_WARNING": "1",
            "PYTHONUNBUFFERED": "1",
        }
        command = [sys.executable, "-m", module]
        super().__init__(command, settings | env, stage.directory / f"{name}.log")


def bot_requests(traffic: Json) -> list[Json]:
    return [r for r in traffic["requests"] if str(r["userAgent"]).startswith(BOT_AGENT_PREFIX)]


def agent_requests(traffic: Json, agent: str) -> list[Json]:
    return [r for r in traffic["requests"] if r["userAgent"] == agent]


def bot_watches(traffic: Json) -> int:
    return sum(int(w["open"]) for w in traffic["watches"] if str(w["userAgent"]).startswith(BOT_AGENT_PREFIX))


def dumps(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def advance_until(
    stage: Stage, done: Callable[[], T], *, stride: float = 5.0, limit: float = 1800.0, quiet: float = 0.3
) -> T:
    """Move the sim's manual clock `stride` s at a time until `done()` holds. After a step that changed
    what the bot watches, the bot (its own process) gets `quiet` real seconds to answer before the clock
    moves again, so each milestone reaches Slack on its own, as it would with minutes between them."""
    moved, news = 0.0, True
    while moved <= limit:
        if news:
            with contextlib.suppress(TimeoutError):
                return stage.slack.wait_until(done, timeout=quiet)
        elif found := done():
            return found
        news = stage.sim.run(lambda: _advance_watched(stage.sim.world, stride))
        moved += stride
    raise TimeoutError(f"not reached within {limit:g} simulated seconds")


def _advance_watched(cluster: world.World, seconds: float) -> bool:
    """Advance; True if pods, events or nodes changed (what the bot's informers would deliver)."""
    before = cluster.store.resource_version
    cluster.advance(seconds, step=1)
    return any(c.resource in WATCHED for c in cluster.store.changes_after(before))


def roots(stage: Stage, channel: str) -> list[Json]:
    """The bot's thread roots in a channel, oldest first."""
    return [m for m in stage.slack.messages(channel) if not m["thread_ts"] and m["bot_id"]]
