"""Real processes the restart tests start, kill and start again: a redis-server and `gpubot serve`.

Each keeps its address across restarts (the Redis socket path, the bot's identity and log), so a
restarted process takes the place of the one killed, as a container restarted in its pod does.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import redis

from bot.testing import stages
from sim.cluster import world
from sim.slack.runner import BackgroundSlack

CONNECTED = "Starting to receive messages from a new connection"
LEADING = "leading: resumed"
STARTUP = 60.0
"""Real seconds for a bot to import, sync its informers and connect; reached only when broken."""
REDIS_START = 10.0


class RedisServer:
    """A private redis-server on a Unix socket that can be stopped and started again at the same path."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH; install it (Debian: apt install redis-server)")
        self.binary = binary
        self.socket = directory / "redis.sock"
        self.url = f"unix://{self.socket}"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        command = [self.binary, "--port", "0", "--unixsocket", str(self.socket), "--save", ""]
        command += ["--appendonly", "no"]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + REDIS_START
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start (exit code {self._process.poll()})")
            time.sleep(0.02)

    def stop(self) -> None:
        """Down, as a crashed Redis is: it keeps nothing (no persistence), and its socket goes away."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=REDIS_START)
            self._process = None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()

    def flush(self) -> None:
        with redis.Redis.from_url(self.url) as connection:
            connection.flushall()

    def keys(self, pattern: str = "*") -> list[str]:
        with redis.Redis.from_url(self.url) as connection:
            return sorted(k.decode() for k in connection.keys(pattern))

    def _answers(self) -> bool:
        try:
            with redis.Redis.from_url(self.url) as connection:
                return bool(connection.ping())
        except (redis.ConnectionError, FileNotFoundError):
            return False


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def bot_environment(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    redis_url: str,
    directory: Path,
    **extra: str,
) -> dict[str, str]:
    """What `gpubot serve` reads, pointed at the sim, the emulator and the private Redis; the sim's URL
    is for `serve_on_sim_clock`, which runs the bot on the sim's time."""
    stage = stages.Stage(sim, slack, redis_url, directory)
    return stages.serve_environment(stage, GPUBOT_SIM_URL=sim.url, GPUBOT_HEALTH_PORT="0", **extra)


class BotProcess:
    """One bot replica as a real OS process; `kill` is SIGKILL, so nothing runs on the way down."""

    def __init__(self, env: Mapping[str, str], log: Path, *, slack: BackgroundSlack) -> None:
        self.env = dict(env)
        self.log = log
        self.slack = slack
        self.identity = self.env.get("POD_NAME", "")
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self, *, wait_for: str = CONNECTED) -> None:
        """Start and wait until the log says `wait_for` (by default: its Socket Mode connection is up,
        which `serve` opens after the informers synced and the replica led, or found another leading)."""
        marker = len(self.lines())
        command = [sys.executable, "-m", "tests.restarts.serve_on_sim_clock"]
        with self.log.open("ab") as output:
            self._process = subprocess.Popen(
                command, env=self.env, stdout=output, stderr=subprocess.STDOUT, cwd=Path.cwd()
            )
        self.starts += 1
        self.wait_for_log(wait_for, after=marker)

    def kill(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGKILL)
        self._process.wait(timeout=STARTUP)

    def terminate(self) -> int:
        if self._process is None or self._process.poll() is not None:
            return self._process.returncode if self._process else 0
        self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout=STARTUP)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def messages(self, *, after: int = 0) -> list[str]:
        """Log messages (the JSON lines' `message`), from line `after` on."""
        found = []
        for line in self.lines()[after:]:
            with contextlib.suppress(ValueError):
                record: dict[str, Any] = json.loads(line)
                found.append(str(record.get("message", "")))
                continue
            found.append(line)
        return found

    def wait_for_log(self, words: str, *, after: int = 0, timeout: float = STARTUP) -> None:
        deadline = time.monotonic() + timeout
        while not any(words in m for m in self.messages(after=after)):
            if not self.alive:
                code = self._process.returncode if self._process else None
                raise AssertionError(f"bot exited with {code}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"bot did not log {words!r} within {timeout} s:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self, count: int = 60) -> str:
        return "\n".join(self.lines()[-count:])


def wait(predicate: Callable[[], Any], *, timeout: float = STARTUP, what: str = "condition") -> Any:
    """Poll a condition another process makes true (the sim and the emulator answer on their own threads)."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)
    return result
