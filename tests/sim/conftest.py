"""Fixtures the embedded cluster's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.cluster import world
from tests.sim.test_kubectl import Kubectl


@pytest.fixture
def kubectl(sim: world.BackgroundWorld, tmp_path: Path) -> Kubectl:
    """The real kubectl with its own kubeconfig, cache and home, pointed at this test's sim."""
    config = tmp_path / "kubeconfig"
    world.write_kubeconfig(config, sim.url)
    return Kubectl(config, tmp_path / "cache", tmp_path)
