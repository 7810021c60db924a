"""Wall time of the seed scenario on the embedded cluster, at --speed 60 and on a manual clock.

The manual-clock run is the baseline: the same scale-up from zero and back, paced only by how fast the
simulator computes. The ratio says how much of the speed-60 run is waiting for simulated time.

    .venv/bin/python -m bench.seed_scenario
"""

from __future__ import annotations

import io
import time

from kubernetes import client

from sim import seed
from sim.cluster import world


def run_manual() -> tuple[float, float]:
    """Returns (wall seconds, simulated seconds) for the seed scenario on a manual clock."""
    started = time.perf_counter()
    with world.BackgroundWorld(world.WorldConfig()) as sim:
        core = client.CoreV1Api(client.ApiClient(client.Configuration(host=sim.url)))
        seed.post_pod(sim.url, seed.seed_pod(), strict=True)
        while core.read_namespaced_pod("gpu-pod", "default").status.phase != "Running":
            sim.advance(10, step=2)
        core.delete_namespaced_pod("gpu-pod", "default")
        while any("gpu-pool" in n.metadata.name for n in core.list_node().items):
            sim.advance(10, step=2)
        simulated = sim.run(sim.world.clock.now)
    return time.perf_counter() - started, simulated


def run_speed(speed: float) -> float:
    started = time.perf_counter()
    seed.run_demo(speed=speed, out=io.StringIO())
    return time.perf_counter() - started


def main() -> None:
    manual_wall, simulated = run_manual()
    speed_wall = run_speed(60.0)
    print(f"seed scenario: {simulated / 60:.1f} simulated minutes")
    print(f"  manual clock (baseline)  {manual_wall:6.2f} s wall")
    print(f"  --speed 60               {speed_wall:6.2f} s wall  (ideal {simulated / 60:.1f} s; budget 30 s)")
    print(f"  ratio speed-60 / baseline {speed_wall / manual_wall:6.1f}x")


if __name__ == "__main__":
    main()
