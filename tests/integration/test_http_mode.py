"""HTTP mode end to end: the emulator POSTs signed slash commands to the real bot over real HTTP.

First in-process (`app.build` served by `http_mode.make_http_server` on a free loopback port), then
`gpubot serve` itself as a subprocess, which must answer a signed `/gpu help` and exit 0 on SIGTERM.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot import app, runtime, settings
from bot.adapters import http_mode
from bot.core import labels
from bot.testing import stages
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    WAIT,
    advance_until,
    bot_settings,
    gpubot_pods,
    roots,
    run_and_wait_for_thread,
    step_reached,
)

SECRET = "http-mode-signing-secret"
PATH = "/slack/events"
STARTUP = 60.0
"""Real seconds for `gpubot serve` to import, sync its informers and open its port."""

pytestmark = pytest.mark.usefixtures("slack_env")


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    """The emulator in HTTP mode; each test points it at the bot's URL once the bot listens."""
    config = SlackConfig(mode="http", rate_limits=RateLimitConfig(enabled=False))
    with BackgroundSlack(config) as running:
        yield running


def http_settings(base: settings.Settings) -> settings.Settings:
    slack = dataclasses.replace(base.slack, mode="http", signing_secret=SECRET, app_token="", http_path=PATH)
    return dataclasses.replace(base, slack=slack)


@contextlib.contextmanager
def served_bot(config: settings.Settings) -> Iterator[tuple[runtime.Bot, str]]:
    """The real bot behind a real HTTP server on a free loopback port: (bot, the URL Slack POSTs to)."""
    bot = app.build(config)
    bot.start(sync_timeout=WAIT)
    server = http_mode.make_http_server(bot.app, slack=config.slack, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, name="bolt-http", daemon=True)
    thread.start()
    try:
        yield bot, f"http://127.0.0.1:{server.server_port}{PATH}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=WAIT)
        bot.stop()


@pytest.fixture
def bot_url(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[str]:
    with served_bot(http_settings(bot_settings(sim, slack, tmp_path, redis_url))) as (_, url):
        slack.configure_http(bot_url=url, signing_secret=SECRET)
        yield url


def test_run_and_status_over_http(sim: world.BackgroundWorld, slack: BackgroundSlack, bot_url: str) -> None:
    root = run_and_wait_for_thread(sim, slack)  # the ack came back in the HTTP response
    (pod,) = gpubot_pods(sim)
    name = pod["metadata"]["name"]
    assert pod["metadata"]["labels"][labels.OWNER_LABEL] == "U_ALICE"
    assert pod["metadata"]["annotations"][labels.THREAD_TS_ANNOTATION] == root["ts"]
    advance_until(sim, slack, step_reached(slack, "scaling up"))

    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    assert (delivery.transport, delivery.status, delivery.acked) == ("http", 200, True)
    report = slack.wait_until(
        lambda: [e for e in slack.ephemerals("U_ALICE") if "Your workloads" in e["text"]], timeout=WAIT
    )
    assert f"`{name}`" in report[0]["text"]


def test_a_bad_signature_is_refused_and_changes_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot_url: str
) -> None:
    slack.configure_http(signing_secret="not-the-bots-secret")
    refused = slack.type_command("U_ALICE", "C_GPU", "/gpu", "run nvidia/cuda:12.4.1-base-ubuntu22.04")
    assert (refused.acked, refused.status, refused.error) == (False, 401, "http_401")
    assert refused.shown == "error_notice"  # Slack tells the user the command failed

    slack.configure_http(signing_secret=SECRET)  # the same server still serves signed requests
    helped = slack.type_command("U_ALICE", "C_GPU", "/gpu", "help")
    assert helped.acked and helped.ack_payload is not None and "/gpu run IMAGE" in helped.ack_payload["text"]
    assert not gpubot_pods(sim) and not roots(slack)
    assert not slack.calls("chat.postMessage") and not slack.calls("chat.postEphemeral")


# -- `gpubot serve` as an operator runs it --------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll until the port accepts connections; fail at once (with the log) if the bot exits instead."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"gpubot serve exited with {process.returncode}:\n{log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise AssertionError(f"gpubot serve did not listen on {port} within {STARTUP} s:\n{log.read_text()}")


@dataclasses.dataclass
class ServedProcess:
    process: subprocess.Popen[bytes]
    port: int
    """Slack's HTTP port."""
    health_port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PATH}"


@contextlib.contextmanager
def gpubot_serve(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    tmp_path: Path,
    redis_url: str,
    extra_env: dict[str, str] | None = None,
) -> Iterator[ServedProcess]:
    """`gpubot serve` in HTTP mode as an operator runs it, on the sim, the emulator (pointed at it) and
    Redis; killed on the way out if it is still running."""
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    port, health_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in stages.LOOPBACK_UNSAFE_ENV}
    env |= {
        "SLACK_MODE": "http",
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.api_url,
        "PORT": str(port),
        "GPUBOT_HEALTH_PORT": str(health_port),
        "GPUBOT_NAMESPACE": "default",  # as tests/integration/botkit.py: the sim's unlabelled namespace
        "KUBECONFIG": str(kubeconfig),
        "REDIS_URL": redis_url,
        "SKIP_SLACK_SDK_WARNING": "1",
    } | (extra_env or {})
    log = tmp_path / "gpubot.log"
    gpubot = Path(sys.executable).with_name("gpubot")  # the console script an install puts on PATH
    with log.open("wb") as output:
        process = subprocess.Popen([str(gpubot), "serve"], env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, log)
        slack.configure_http(bot_url=f"http://127.0.0.1:{port}{PATH}", signing_secret=SECRET)
        yield ServedProcess(process, port, health_port, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_gpubot_serve_answers_signed_commands_and_stops_on_sigterm(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with gpubot_serve(sim, slack, tmp_path, redis_url) as served:
        delivery = slack.type_command("U_BOB", "C_GPU", "/gpu", "help")
        assert delivery.acked and delivery.ack_payload is not None, served.log.read_text()
        for usage in ("/gpu run IMAGE", "/gpu status [all]", "/gpu release [NAME|all]"):
            assert usage in delivery.ack_payload["text"]
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=30) == 0, served.log.read_text()
    assert "stopping" in served.log.read_text()
