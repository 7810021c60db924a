"""`gpubot sim` as a user runs it: a real process, its kubeconfig, the commands it prints, a clean Ctrl-C,
state across restarts."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from sim import seed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_sim(tmp_path: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    return start_sim_with_banner(tmp_path, port, *extra)[0]


def start_sim_with_banner(tmp_path: Path, port: int, *extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "sim",
            "--listen",
            f"127.0.0.1:{port}",
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--speed",
            "0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    banner = []
    for line in process.stdout:
        banner.append(line)
        if line.startswith("Ctrl-C stops it"):
            break
    assert any("kubectl get nodes" in line for line in banner), banner
    return process, banner


def stop_sim(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=20)
    assert process.returncode == 0, out
    return out


def core_for(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def advance(port: int, seconds: float) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/simctl/v1/clock/advance",
        data=json.dumps({"seconds": seconds}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def test_sim_writes_a_kubeconfig_the_client_uses_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    process = start_sim(tmp_path, port, "--no-gpu-pool")
    try:
        loaded = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        assert loaded["clusters"][0]["cluster"]["server"] == f"http://127.0.0.1:{port}"
        nodes = core_for(tmp_path / "kubeconfig").list_node().items
        assert len(nodes) == 2
        assert all("default-pool" in n.metadata.name for n in nodes)
    finally:
        out = stop_sim(process)
    assert "stopping the simulated cluster" in out


def test_state_dir_keeps_the_cluster_across_a_restart(tmp_path: Path) -> None:
    port = free_port()
    state = tmp_path / "state"
    process = start_sim(tmp_path, port, "--state-dir", str(state))
    try:
        status, _ = seed.post_pod(f"http://127.0.0.1:{port}", seed.seed_pod(), strict=True)
        assert status == 201
        advance(port, 600)
        before = core_for(tmp_path / "kubeconfig").read_namespaced_pod("gpu-pod", "default")
        assert before.status.phase == "Running"
    finally:
        stop_sim(process)
    process = start_sim(tmp_path, port, "--state-dir", str(state))
    try:
        core = core_for(tmp_path / "kubeconfig")
        after = core.read_namespaced_pod("gpu-pod", "default")
        assert after.metadata.uid == before.metadata.uid
        assert after.status.phase == "Running"
        assert int(after.metadata.resource_version) >= int(before.metadata.resource_version)
        assert any("gpu-pool" in n.metadata.name for n in core.list_node().items)
        advance(port, 3600)  # the restored kubelet knows `sleep 3600` ends; restartPolicy Always restarts it
        restarted = core.read_namespaced_pod("gpu-pod", "default").status.container_statuses[0]
        assert restarted.restart_count == 1
    finally:
        stop_sim(process)


def test_listen_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "sim",
            "--listen",
            "0.0.0.0:1",
            "--kubeconfig",
            str(tmp_path / "k"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "loopback only" in result.stderr


def printed_blocks(banner: list[str]) -> dict[str, list[str]]:
    """The banner's `heading:` lines, each with the indented command lines under it."""
    blocks: dict[str, list[str]] = {}
    heading = ""
    for line in banner:
        if line.startswith("  ") and heading:
            blocks[heading].append(line.strip())
        elif line.rstrip().endswith(":"):
            heading = line.strip()
            blocks[heading] = []
        else:
            heading = ""
    return blocks


def run_as_typed(lines: list[str], env: dict[str, str]) -> list[str]:
    """`export` lines set `env`; every other line runs as a command and must succeed. Their outputs."""
    outputs = []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[0] == "export":
            env.update(word.partition("=")[::2] for word in words[1:])
            continue
        done = subprocess.run(words, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    return outputs


@pytest.mark.parametrize(
    "extra",
    [[], ["--no-gpu-pool", "--speed", "60"]],  # a clock that runs: the autoscaler scans the created pool
    ids=["default", "no-gpu-pool"],
)
def test_every_command_it_prints_works_as_printed(tmp_path: Path, extra: list[str]) -> None:
    port = free_port()
    process, banner = start_sim_with_banner(tmp_path, port, *extra)
    gpubot_bin = str(Path(sys.executable).parent)  # `gpubot` as the user's install puts it on PATH
    fresh = {
        "PATH": os.pathsep.join([gpubot_bin, "/usr/bin", "/bin"]),
        "HOME": str(tmp_path / "home"),  # no kubeconfig, gcloud configuration or AWS profile of the user's
        "REDIS_URL": "redis://127.0.0.1:1/0",  # as on a machine without Redis: doctor has no history
    }
    try:
        blocks = printed_blocks(banner)
        assert {"kubectl:", "gpubot pool and gpubot doctor:"} <= set(blocks), banner
        (nodes,) = run_as_typed(blocks["kubectl:"], dict(fresh))
        assert nodes.count("gke-demo-default-pool-") == 2, nodes
        *_, shown, checked = run_as_typed(blocks["gpubot pool and gpubot doctor:"], dict(fresh))
        assert "GKE pool gpu-pool in cluster demo" in shown and "problems: none" in shown, shown
        assert "current size  0 node(s) in Kubernetes" in shown, shown
        assert " 0 failed" in checked, checked
        gcloud = next(heading for heading in blocks if heading.startswith("gcloud"))
        if shutil.which("gcloud", path=fresh["PATH"]) is not None:  # tests/sim/test_gke.py skips it too
            (listed,) = run_as_typed(blocks[gcloud], dict(fresh))
            assert "gpu-pool" in listed and "n1-standard-4" in listed, listed
    finally:
        stop_sim(process)


def create_pool_over_http(port: int) -> dict[str, Any]:
    body = {"nodePool": {"name": "gpu-2", "config": {"machineType": "n1-standard-4"}}}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/projects/demo/locations/local-a/clusters/demo/nodePools",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        operation: dict[str, Any] = json.load(answer)
    url = f"http://127.0.0.1:{port}/v1/projects/demo/locations/local-a/operations/{operation['name']}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        polled: dict[str, Any] = json.load(answer)
    return polled


@pytest.mark.parametrize(("extra", "status"), [([], "RUNNING"), (["--instant-cloud"], "DONE")])
def test_cloud_operations_take_time_unless_instant(tmp_path: Path, extra: list[str], status: str) -> None:
    port = free_port()
    process = start_sim(tmp_path, port, *extra)
    try:
        assert create_pool_over_http(port)["status"] == status
    finally:
        stop_sim(process)
