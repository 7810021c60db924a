"""Shared fixtures: the embedded cluster on an ephemeral loopback port with a manual clock, the Slack
emulator, the real bot on both, and a private Redis; and each test's marker (unit, sim, slow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kubernetes import client

from bot import runtime
from bot.adapters import store
from bot.testing import stages
from sim.cluster import config, world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import bot_settings, emulator_config, running_bot

ZONE_MARKERS = {
    "unit": "unit",
    "sim": "sim",
    "integration": "sim",
    "hostile": "sim",
    "deploy": "sim",
    "faults": "slow",
    "restarts": "slow",
    "bench": "slow",
}
"""The marker a test gets from its folder under tests/, unless its module states one (pyproject.toml says
what each means); `make test-fast` runs `-m unit`."""
SPEEDS = frozenset({"unit", "sim", "slow"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(mark.name in SPEEDS for mark in item.iter_markers()):
            continue
        folder = item.path.parent.name
        if folder in ZONE_MARKERS:
            item.add_marker(ZONE_MARKERS[folder])


@pytest.fixture
def sim() -> Iterator[world.BackgroundWorld]:
    """Cloud operations finish at once: on a manual clock a client waiting for one would wait forever.
    Tests of the waiting itself build their own world (tests/integration/test_pool_wait.py)."""
    with world.BackgroundWorld(world.WorldConfig(timings=config.instant_cloud())) as running:
        yield running


@pytest.fixture
def sim_without_gpu_pool() -> Iterator[world.BackgroundWorld]:
    with world.BackgroundWorld(world.WorldConfig(gpu_pool=False, timings=config.instant_cloud())) as running:
        yield running


@pytest.fixture
def api_client(sim: world.BackgroundWorld) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def slack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """WebClient adopts proxy variables even for loopback, and Bolt prefers SLACK_* tokens from the env."""
    for name in stages.LOOPBACK_UNSAFE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SKIP_SLACK_SDK_WARNING", "1")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A private redis-server on a Unix socket for the whole run, so no test touches the machine's."""
    with store.private_redis_server() as url:
        if url is None:
            pytest.fail("redis-server is not on PATH; install it (Debian: apt install redis-server)")
        yield url


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The private Redis, emptied for each test."""
    with redis.Redis.from_url(redis_server) as connection:
        connection.flushdb()
    return redis_server


@pytest.fixture
def slack(slack_env: None) -> Iterator[BackgroundSlack]:
    with BackgroundSlack(emulator_config()) as running:
        yield running


@pytest.fixture
def bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[runtime.Bot]:
    with running_bot(bot_settings(sim, slack, tmp_path, redis_url), slack) as running:
        yield running
