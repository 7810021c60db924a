"""Shared fixtures: the embedded cluster on an ephemeral loopback port, with a manual clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from sim.cluster import world


@pytest.fixture
def sim() -> Iterator[world.BackgroundWorld]:
    with world.BackgroundWorld(world.WorldConfig()) as running:
        yield running


@pytest.fixture
def sim_without_gpu_pool() -> Iterator[world.BackgroundWorld]:
    with world.BackgroundWorld(world.WorldConfig(gpu_pool=False)) as running:
        yield running


@pytest.fixture
def api_client(sim: world.BackgroundWorld) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)
