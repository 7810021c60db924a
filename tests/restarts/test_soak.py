"""The soak, small: 50 workloads through every ending; `make soak` runs 10,000 (see soak.py)."""

from __future__ import annotations

import dataclasses

from tests.restarts import soak

FAST = dataclasses.replace(soak.SoakConfig(), workloads=50, batch=25, users=20, channels=5, max_nodes=40)


def test_fifty_workloads_leave_no_pod_no_node_and_no_open_thread() -> None:
    with soak.environment(FAST) as run:
        figures = run.run()
    shown = "\n".join(figures.lines())
    assert figures.pods_created == figures.threads == 50, shown
    assert figures.duplicate_pods == figures.orphaned_pods == figures.pool_nodes == 0, shown
    assert figures.threads_open == 0 and figures.repeated == 0, shown
    assert not figures.unsaid, shown  # every thread said its own ending
    planned = figures.endings
    assert figures.seen["released"] == planned["release"], shown
    assert figures.seen["expired"] == planned["expire"] + planned["bad-image"], shown
    assert figures.seen["idle-released"] == planned["idle"], shown
    assert figures.seen["cleaned up"] == planned["fail"] + planned["succeed"], shown
    assert figures.seen["reminded"] == figures.seen["nudged"] == figures.seen["expired"], shown
    assert figures.clean
