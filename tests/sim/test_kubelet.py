"""The simulated kubelet through the real client: what containers do, and what `kubectl describe` shows."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.cluster import world
from tests.sim.test_scenarios import advance_until, events_of, now, pod, with_reason


def read(core: client.CoreV1Api, name: str) -> Any:
    return core.read_namespaced_pod(name, "default")


def container_state(core: client.CoreV1Api, name: str) -> Any:
    return read(core, name).status.container_statuses[0]


def exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        read(core, name)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


@pytest.mark.parametrize(
    ("command", "phase", "reason", "exit_code"),
    [
        pytest.param(["sleep", "5"], "Succeeded", "Completed", 0, id="sleep-completes"),
        pytest.param(["sh", "-c", "sleep 2; exit 3"], "Failed", "Error", 3, id="script-exit-code"),
        pytest.param(["false"], "Failed", "Error", 1, id="false-fails"),
    ],
)
def test_containers_that_exit_with_restart_policy_never(
    sim: world.BackgroundWorld,
    core: client.CoreV1Api,
    command: list[str],
    phase: str,
    reason: str,
    exit_code: int,
) -> None:
    core.create_namespaced_pod("default", pod("once", command=command, restart="Never"))
    finished_at = advance_until(sim, lambda: read(core, "once").status.phase == phase, limit=30, step=1)
    terminated = container_state(core, "once").state.terminated
    assert (terminated.reason, terminated.exit_code) == (reason, exit_code)
    assert container_state(core, "once").restart_count == 0
    ready = next(c for c in read(core, "once").status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "PodCompleted" if phase == "Succeeded" else "PodFailed")
    sim.advance(60, step=5)
    assert read(core, "once").status.phase == phase, "a finished pod stays finished"
    assert finished_at > 0


def test_a_crashing_container_backs_off_longer_each_time(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod("crasher", command=["false"]))
    sim.advance(5, step=1)
    [started] = with_reason(core, "crasher", "Started")
    assert started.count == 2, "the first restart is immediate, without back-off"
    assert with_reason(core, "crasher", "BackOff")[0].count == 1
    advance_until(
        sim,
        lambda: (
            container_state(core, "crasher").state.waiting is not None
            and container_state(core, "crasher").state.waiting.reason == "CrashLoopBackOff"
        ),
        limit=30,
        step=1,
    )
    status = container_state(core, "crasher")
    assert status.restart_count == 1, "one restart so far; the second crash is waiting out its back-off"
    assert status.state.waiting.message.startswith(
        "back-off 10s restarting failed container=main pod=crasher_default("
    )
    assert status.last_state.terminated.reason == "Error" and status.last_state.terminated.exit_code == 1
    assert read(core, "crasher").status.phase == "Running"
    restarts_at: list[float] = []
    for _ in range(4):
        seen = container_state(core, "crasher").restart_count
        restarts_at.append(
            advance_until(
                sim,
                lambda seen=seen: container_state(core, "crasher").restart_count > seen,
                limit=400,
                step=1,
            )
        )
    gaps = [b - a for a, b in itertools.pairwise(restarts_at)]
    assert gaps == sorted(gaps) and gaps[-1] >= 2 * gaps[0], f"back-off grows: {gaps}"
    [backoff] = with_reason(core, "crasher", "BackOff")
    assert backoff.type == "Warning" and backoff.count >= 4
    uid = read(core, "crasher").metadata.uid
    assert backoff.message == f"Back-off restarting failed container main in pod crasher_default({uid})"


def test_an_image_that_does_not_exist_goes_to_image_pull_backoff(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    image = "registry.example.com/team/notfound:v1"
    core.create_namespaced_pod("default", pod("missing", image=image))
    sim.advance(10, step=1)
    messages = [(e.type, e.reason, e.message) for e in events_of(core, "missing")]
    assert ("Warning", "Failed", "Error: ErrImagePull") in messages
    assert ("Normal", "BackOff", f'Back-off pulling image "{image}"') in messages
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in messages
    failed = next(m for t, r, m in messages if r == "Failed" and m.startswith("Failed to pull image"))
    assert failed.startswith(f'Failed to pull image "{image}": rpc error: code = NotFound')
    order = [m for _, _, m in messages]
    assert order.index("Error: ErrImagePull") < order.index("Error: ImagePullBackOff")
    sim.advance(120, step=5)
    state = container_state(core, "missing").state.waiting
    assert (
        state.reason in ("ImagePullBackOff", "ErrImagePull")
        and read(core, "missing").status.phase == "Pending"
    )
    assert with_reason(core, "missing", "Pulling")[0].count >= 3, "the kubelet keeps retrying"


def test_an_image_already_on_the_node_is_not_pulled_again(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    node = core.list_node().items[0].metadata.name
    pinned = {"kubernetes.io/hostname": node}
    core.create_namespaced_pod("default", pod("first", image="python:3.12", selector=pinned))
    advance_until(sim, lambda: read(core, "first").status.phase == "Running", limit=60, step=1)
    core.create_namespaced_pod("default", pod("second", image="python:3.12", selector=pinned))
    advance_until(sim, lambda: read(core, "second").status.phase == "Running", limit=60, step=1)
    assert [e.reason for e in with_reason(core, "first", "Pulling")] == ["Pulling"]
    assert with_reason(core, "second", "Pulling") == []
    [pulled] = with_reason(core, "second", "Pulled")
    assert pulled.message == 'Container image "python:3.12" already present on machine'


@pytest.mark.parametrize(
    ("command", "takes"),
    [
        pytest.param(["sleep", "3600"], 30, id="sleep-ignores-sigterm"),
        pytest.param(["python", "-m", "http.server"], 1, id="server-exits-on-sigterm"),
    ],
)
def test_deleting_a_running_pod_waits_for_its_process(
    sim: world.BackgroundWorld, core: client.CoreV1Api, command: list[str], takes: float
) -> None:
    core.create_namespaced_pod("default", pod("victim", command=command))
    advance_until(sim, lambda: read(core, "victim").status.phase == "Running", limit=60, step=1)
    core.delete_namespaced_pod("victim", "default")
    deleted_at = now(sim)
    terminating = read(core, "victim")
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    gone_at = advance_until(sim, lambda: not exists(core, "victim"), limit=60, step=0.5)
    assert takes <= gone_at - deleted_at <= takes + 1
    [killing] = with_reason(core, "victim", "Killing")
    assert killing.message == "Stopping container main"
