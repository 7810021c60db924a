"""The real `kubectl logs` against the embedded cluster: -f, --tail, --previous, -c, the server's errors."""

from __future__ import annotations

import datetime
import subprocess

from kubernetes import client

from sim.cluster import world
from tests.sim.test_kubectl import TIMEOUT, Kubectl, Lines
from tests.sim.test_pod_logs import phase, run, script, status
from tests.sim.test_scenarios import advance_until


def test_logs_prints_the_output_and_tail_keeps_the_last_lines(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    run(sim, core, script("printer", "echo one; echo two >&2; sleep 5; echo three; sleep 3600"))
    sim.advance(5)
    assert kubectl.ok("logs", "printer") == "one\ntwo\nthree\n"
    assert kubectl.ok("logs", "printer", "--tail=1") == "three\n"
    assert kubectl.ok("logs", "pod/printer", "--tail=2", "-c", "main") == "two\nthree\n"
    stamped = kubectl.ok("logs", "printer", "--timestamps", "--tail=1")
    started = status(core, "printer").state.running.started_at
    expected = started + datetime.timedelta(seconds=5)
    assert stamped == expected.strftime("%Y-%m-%dT%H:%M:%S") + ".000000000Z three\n"


def test_logs_follow_ends_when_the_container_exits(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    run(sim, core, script("slow", "echo first; sleep 10; echo second; sleep 10; echo last"))
    process = kubectl.popen("logs", "-f", "slow")
    lines = Lines(process)
    lines.until("^first$")
    sim.advance(10)
    lines.until("^second$")
    sim.advance(10)
    lines.until("^last$")
    assert process.wait(timeout=TIMEOUT) == 0, "kubectl returns once the stream ends"
    assert phase(core, "slow") == "Succeeded"


def test_logs_previous_and_its_error_before_any_restart(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    run(sim, core, script("crasher", "echo attempt; sleep 5; echo giving up >&2; exit 2", restart="Always"))
    result = kubectl.run("logs", "crasher", "--previous")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (BadRequest): previous terminated container "main" in pod "crasher" not found'
    )
    advance_until(sim, lambda: status(core, "crasher").restart_count == 1, limit=30, step=1)
    assert kubectl.ok("logs", "crasher", "-p") == "attempt\ngiving up\n"
    assert kubectl.ok("logs", "crasher") == "attempt\n"


def test_logs_of_a_container_still_being_created(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    core.create_namespaced_pod("default", script("fresh", "echo hi"))
    sim.advance(1)
    result = kubectl.run("logs", "fresh")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (BadRequest): container "main" in pod "fresh" is waiting to start: '
        "ContainerCreating"
    )


def test_logs_of_several_containers_default_to_the_first_or_take_c(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    body = script("pair", "echo from a; sleep 3600")
    body["spec"]["containers"][0]["name"] = "a"
    body["spec"]["containers"].append(
        {"name": "b", "image": "busybox:1.36", "command": ["sh", "-c", "echo from b"]}
    )
    run(sim, core, body)
    result = kubectl.run("logs", "pair")
    assert (result.returncode, result.stdout) == (0, "from a\n")
    assert result.stderr.strip() == 'Defaulted container "a" out of: a, b'
    assert kubectl.ok("logs", "pair", "-c", "b") == "from b\n"
    unknown = kubectl.run("logs", "pair", "-c", "c")
    assert unknown.returncode == 1 and "container c is not valid for pod pair" in unknown.stderr


def test_logs_of_an_oom_killed_container(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    body = script("hungry", "echo start; tail /dev/zero", resources={"limits": {"memory": "64Mi"}})
    run(sim, core, body)
    advance_until(sim, lambda: phase(core, "hungry") == "Failed", limit=5, step=1)
    assert kubectl.ok("logs", "hungry") == "start\n"
    described = kubectl.ok("describe", "pod", "hungry")
    assert "Reason:       OOMKilled" in described and "Exit Code:    137" in described


def test_logs_follow_can_be_interrupted(
    sim: world.BackgroundWorld, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    run(sim, core, script("forever", "echo up; python serve.py"))
    process = kubectl.popen("logs", "--follow", "forever")
    Lines(process).until("^up$")
    process.terminate()
    try:
        process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:  # pragma: no cover - the assertion below reports it
        process.kill()
    assert process.returncode is not None
    assert kubectl.ok("logs", "forever") == "up\n", "the server is still answering"
