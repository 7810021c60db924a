"""Probes, metrics and JSON logs of the real bot on the sim and the Slack emulator, read over real HTTP.

The probe server listens on a free port; /metrics is parsed with prometheus-client's own parser, and each
number is checked against what the sim and the emulator hold.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler

from bot import app, runtime, settings
from bot.adapters import observability, socket_mode
from bot.core import podspec, reaping
from sim.cluster import world
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, advance_until, bot_settings, gpubot_pods, step_reached

pytestmark = pytest.mark.usefixtures("slack_env")
NEVER = 3600.0
"""A reaper interval the test never reaches: it runs the rounds itself."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def scrape(port: int) -> Samples:
    status, body = get(port, "/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


@contextlib.contextmanager
def json_log_lines(name: str) -> Iterator[io.StringIO]:
    """What logger `name` writes through the JSON formatter, at INFO and above."""
    logger, lines = logging.getLogger(name), io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(observability.JsonFormatter())
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
def config(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> settings.Settings:
    found = bot_settings(sim, slack, tmp_path, redis_url)
    return dataclasses.replace(found, reaper=settings.ReaperSettings(interval_seconds=NEVER))


@contextlib.contextmanager
def probed_bot(
    config: settings.Settings, slack: BackgroundSlack, sim: world.BackgroundWorld
) -> Iterator[tuple[runtime.Bot, int]]:
    """The bot as `gpubot serve` runs it: probes first, then informers, then the Socket Mode connection;
    each stage is checked on /readyz as it comes."""
    bot = app.build(config, clock=sim.world.clock.datetime)
    port = bot.telemetry.serve(port=0, host="127.0.0.1", ready=bot.unready_reason).port
    handler = SocketModeHandler(bot.app, config.slack.app_token)
    try:
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (503, '{"ready": false, "reason": "informers not synced"}\n')
        bot.start(sync_timeout=WAIT)
        assert get(port, "/readyz") == (503, '{"ready": false, "reason": "Slack not connected"}\n')
        socket_mode.connect(handler)
        bot.slack_connected = handler.client.is_connected
        slack.wait_until(lambda: get(port, "/readyz")[0] == 200, timeout=WAIT)
        yield bot, port
    finally:
        socket_mode.hang_up(handler)
        bot.stop()


def reap_until_reminded(sim: world.BackgroundWorld, bot: runtime.Bot) -> None:
    for _ in range(90):  # the lease is an hour, the reminder comes 15 minutes before its end
        sim.advance(60, step=60)
        bot.cluster.wait_synced(WAIT)
        if any(done.act is reaping.Act.REMIND for done in bot.reap()):
            return
    raise AssertionError("no reminder within 90 simulated minutes")


def test_metrics_count_commands_time_to_running_scale_ups_reaps_and_429s(
    config: settings.Settings, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    with probed_bot(config, slack, sim) as (bot, port), json_log_lines("gpubot.audit") as audit_lines:
        slack.wait_until(lambda: bot.leading, timeout=WAIT)
        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} --hours 1 -- python train.py")
        advance_until(sim, slack, step_reached(slack, "Running"))
        slack.type_command("U_BOB", "C_GPU", "/gpu", f"run {CUDA} --gpus 3 -- python train.py")
        slack.wait_until(lambda: len(slack.ephemerals("U_BOB")) == 1, timeout=WAIT)  # the ack refuses it

        slack.set_faults(FaultConfig(rate=1.0, statuses=(429,), methods=frozenset({"chat.postEphemeral"})))
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
        slack.wait_until(lambda: bot.outbox.counters().rate_limited > 0, timeout=WAIT)
        slack.set_faults(FaultConfig())
        slack.wait_until(lambda: len(slack.ephemerals("U_ALICE")) == 2, timeout=WAIT)  # ack text, status

        reap_until_reminded(sim, bot)
        assert bot.outbox.flush(WAIT)
        seen = scrape(port)

    (pod,) = gpubot_pods(sim)
    created = podspec.parse_time(pod["metadata"]["creationTimestamp"])
    started = podspec.parse_time(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    assert created is not None and started is not None
    assert seen[("gpubot_commands_total", (("command", "run"), ("outcome", "ok")))] == 1
    assert seen[("gpubot_commands_total", (("command", "run"), ("outcome", "refused")))] == 1
    assert seen[("gpubot_commands_total", (("command", "status"), ("outcome", "ok")))] == 1
    assert seen[("gpubot_time_to_running_seconds_count", ())] == 1
    assert seen[("gpubot_time_to_running_seconds_sum", ())] == (started - created).total_seconds() > 30
    assert seen[("gpubot_scale_ups_total", (("pool", "gpu-pool"),))] == 1
    assert seen[("gpubot_reaper_acts_total", (("act", "remind"), ("dry_run", "false")))] == 1
    rejected = [call for call in slack.calls("chat.postEphemeral") if call.status == 429]
    assert seen[("gpubot_slack_rate_limited_total", ())] == len(rejected) > 0
    assert seen[("gpubot_slack_calls_total", ())] > 0
    assert seen[("gpubot_slack_outbox_depth", ())] == 0
    assert seen[("gpubot_leader", ())] == 1

    records = [json.loads(line) for line in audit_lines.getvalue().splitlines()]
    runs = [r for r in records if r.get("audit", {}).get("action") == "run"]
    (run,) = runs
    assert run["level"] == "INFO" and run["logger"] == "gpubot.audit" and run["time"].endswith("Z")
    assert run["audit"]["actor"] == "U_ALICE"
    assert run["audit"]["workload"] == f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def test_a_follower_is_ready_and_says_it_does_not_lead(
    config: settings.Settings, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    with probed_bot(config, slack, sim) as (leader, _):
        slack.wait_until(lambda: leader.leading, timeout=WAIT)
        other = dataclasses.replace(config, leader=dataclasses.replace(config.leader, identity="gpubot-1"))
        with probed_bot(other, slack, sim) as (follower, port):
            assert not follower.leading
            assert get(port, "/readyz") == (200, '{"ready": true}\n')
            assert scrape(port)[("gpubot_leader", ())] == 0


def test_a_stopped_bot_stops_its_probes_and_an_unknown_path_says_where_to_look(
    config: settings.Settings, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    with probed_bot(config, slack, sim) as (_, port):
        status, body = get(port, "/nope")
        assert status == 404 and "/healthz, /readyz or /metrics" in body
    with pytest.raises(OSError):
        get(port, "/healthz")


def test_a_taken_port_is_a_clear_error() -> None:
    first, second = observability.Telemetry(), observability.Telemetry()
    server = first.serve(port=0, host="127.0.0.1", ready=lambda: None)
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{server.port}"):
            second.serve(port=server.port, host="127.0.0.1", ready=lambda: None)
    finally:
        first.stop()


def test_a_readiness_check_that_raises_is_not_ready_and_says_why() -> None:
    def broken() -> Any:
        raise RuntimeError("redis exploded")

    telemetry = observability.Telemetry()
    port = telemetry.serve(port=0, host="127.0.0.1", ready=broken).port
    try:
        status, body = get(port, "/readyz")
    finally:
        telemetry.stop()
    assert status == 503
    assert json.loads(body) == {"ready": False, "reason": "readiness check failed: redis exploded"}
