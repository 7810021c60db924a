"""`gpubot pool` waits for cloud changes that take minutes, on a sim with the default (realistic) times.

The sim's clock is manual: the command runs on a thread while the test moves simulated time on, so what
is asserted is what the command printed and what the cloud holds, never how long anything took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bot import cli
from sim.cluster import world

ROLE = "arn:aws:iam::123456789012:role/eks-node-role"
EKS_INPUTS = ["--node-role", ROLE, "--subnets", "subnet-0a1b,subnet-2c3d"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in t4 profile, no cloud the developer's shell points at, and quick looks at the cloud."""
    for name in ("KUBECONFIG", "GPUBOT_PROFILES_FILE", "GPUBOT_DEFAULT_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name in ("GPUBOT_GKE_ENDPOINT", "GPUBOT_EKS_ENDPOINT", "GPUBOT_AUTOSCALING_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GPUBOT_CLOUD_POLL_SECONDS", "0.1")


@pytest.fixture
def cloud() -> Iterator[world.BackgroundWorld]:
    """The default world's times (GKE create 2 min, EKS create 3 min, ...) on a manual clock."""
    with world.BackgroundWorld(world.WorldConfig(gpu_pool=False)) as running:
        yield running


def gke(sim: world.BackgroundWorld, name: str = "gpu-pool") -> list[str]:
    where = ["--cloud", "gke", "--project", world.PROJECT, "--location", world.LOCATION]
    return [*where, "--cluster", world.CLUSTER, "--name", name, "--endpoint", sim.url]


def eks(sim: world.BackgroundWorld, name: str = "gpu-ng") -> list[str]:
    where = ["--cloud", "eks", "--region", world.EKS_REGION, "--cluster", world.CLUSTER]
    return [*where, "--name", name, "--endpoint", sim.url]


def pool_while_time_passes(
    sim: world.BackgroundWorld, capsys: Any, *argv: str, step: float = 5.0
) -> tuple[int, str, str]:
    """Run `gpubot pool ...` on a thread, moving simulated time on `step` seconds at a time until it ends."""
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(cli.main(["pool", *argv])))
    thread.start()
    while thread.is_alive():
        sim.advance(step, step=step)
        thread.join(0.05)
    captured = capsys.readouterr()
    return codes[0], captured.out, captured.err


def status_of(sim: world.BackgroundWorld, name: str) -> str:
    return sim.run(lambda: sim.world.registry.get(name).status)


def names(sim: world.BackgroundWorld) -> list[str]:
    return sim.run(lambda: [p.name for p in sim.world.registry.list()])


def test_gke_create_set_delete_wait_with_progress(cloud: world.BackgroundWorld, capsys: Any) -> None:
    code, out, err = pool_while_time_passes(cloud, capsys, "create", *gke(cloud), "--max", "5")
    assert code == 0, err
    assert "Creating node pool gpu-pool ... RUNNING (" in err
    assert "Creating node pool gpu-pool ... done in " in err
    assert "created gpu-pool for profile t4" in out and "status        RUNNING" in out
    assert status_of(cloud, "gpu-pool") == "RUNNING"

    code, out, err = pool_while_time_passes(cloud, capsys, "set", *gke(cloud), "--max", "3")
    assert code == 0, err
    assert "Resizing node pool gpu-pool ... RUNNING (" in err and "now scales between 0 and 3 nodes" in out

    code, out, err = pool_while_time_passes(cloud, capsys, "delete", *gke(cloud), "--yes")
    assert code == 0, err
    assert "Deleting node pool gpu-pool ... RUNNING (" in err and "deleted gpu-pool" in out
    assert names(cloud) == ["default-pool"]


def test_eks_create_set_delete_wait_with_progress(cloud: world.BackgroundWorld, capsys: Any) -> None:
    code, out, err = pool_while_time_passes(cloud, capsys, "create", *eks(cloud), "--max", "5", *EKS_INPUTS)
    assert code == 0, err
    assert (
        "Creating nodegroup gpu-ng ... CREATING (" in err and "Creating nodegroup gpu-ng ... done in " in err
    )
    assert "status        ACTIVE" in out and "problems: none" in out  # tagged once ACTIVE

    code, out, err = pool_while_time_passes(cloud, capsys, "set", *eks(cloud), "--max", "3")
    assert code == 0, err
    assert "Resizing nodegroup gpu-ng ... InProgress (" in err and "now scales between 0 and 3" in out

    code, out, err = pool_while_time_passes(cloud, capsys, "delete", *eks(cloud), "--yes")
    assert code == 0, err
    assert "Deleting nodegroup gpu-ng ... DELETING (" in err and "deleted gpu-ng" in out
    assert names(cloud) == ["default-pool"]


def test_show_says_a_pool_is_still_being_made(cloud: world.BackgroundWorld, capsys: Any) -> None:
    cloud.run(lambda: setattr(cloud.world.timings, "gke_pool_create", 600.0))
    thread = threading.Thread(target=lambda: cli.main(["pool", "create", *gke(cloud), "--max", "5"]))
    thread.start()
    try:
        assert cli.main(["pool", "show", *gke(cloud)]) in (0, 2)  # 2 before the create reached the cloud
        while "gpu-pool" not in names(cloud):
            thread.join(0.05)
        assert cli.main(["pool", "show", *gke(cloud)]) == 0
        out = capsys.readouterr().out
        assert "status        PROVISIONING (being created: no node starts before it is RUNNING)" in out
        assert "problems: none" in out
    finally:
        while thread.is_alive():
            cloud.advance(60, step=60)
            thread.join(0.05)


def test_a_wait_that_times_out_says_the_change_carries_on(
    cloud: world.BackgroundWorld, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUBOT_CLOUD_TIMEOUT_SECONDS", "1")
    code = cli.main(["pool", "create", *gke(cloud), "--max", "5"])  # the clock stands still: never DONE
    err = capsys.readouterr().err
    assert code == 1
    (operation,) = cloud.run(lambda: list(cloud.world.gke.operations))
    assert "gpubot pool: stopped waiting after 1s (still RUNNING). GKE carries on creating gpu-pool; " in err
    assert (
        f"check it with: gcloud container operations describe {operation} --project demo --location local-a"
    ) in err
    assert status_of(cloud, "gpu-pool") == "PROVISIONING"
    cloud.advance(cloud.world.timings.gke_pool_create)
    assert status_of(cloud, "gpu-pool") == "RUNNING"


def test_a_failed_gke_operation_is_explained_with_exit_1(cloud: world.BackgroundWorld, capsys: Any) -> None:
    cloud.run(lambda: cloud.world.gke.fail_next_operation("Quota 'NVIDIA_T4_GPUS' exceeded. Limit: 0.0"))
    code, _, err = pool_while_time_passes(cloud, capsys, "create", *gke(cloud), "--max", "5")
    assert code == 1
    assert (
        "gpubot pool: GKE could not create node pool gpu-pool: Quota 'NVIDIA_T4_GPUS' exceeded. Limit: 0.0."
        in err
    )
    assert "Details: gcloud container operations describe operation-" in err
    assert names(cloud) == ["default-pool"]


def test_an_eks_nodegroup_that_ends_create_failed_is_explained(
    cloud: world.BackgroundWorld, capsys: Any
) -> None:
    argv = ["create", *eks(cloud), "--max", "5", "--machine-type", "g4dn.xlarg", "--gpus", "1", *EKS_INPUTS]
    code, _, err = pool_while_time_passes(cloud, capsys, *argv)
    assert code == 1, err
    assert (
        "gpubot pool: EKS could not create nodegroup gpu-ng: it ended CREATE_FAILED "
        "(Ec2LaunchTemplateInvalidConfiguration: The specified instance type g4dn.xlarg is not valid). "
        "Details: aws eks describe-nodegroup --cluster-name demo --nodegroup-name gpu-ng --region local-1"
    ) in err


@pytest.mark.parametrize(
    ("machine", "refusal"),
    [
        ("n1-standrd-4", 'Invalid machine type "n1-standrd-4" in zone "local-a": GCE_NOT_FOUND'),
        (
            "e2-standard-4",
            "[e2-standard-4, nvidia-tesla-t4] features are not compatible for creating instance.",
        ),
    ],
)
def test_gke_refusals_change_nothing(
    cloud: world.BackgroundWorld, capsys: Any, machine: str, refusal: str
) -> None:
    code = cli.main(["pool", "create", *gke(cloud), "--max", "5", "--machine-type", machine, "--gpus", "1"])
    assert code == 2
    assert f"gpubot pool: the cloud refused: {refusal}" in capsys.readouterr().err
    assert names(cloud) == ["default-pool"] and cloud.run(lambda: cloud.world.gke.operations) == {}


def test_ctrl_c_leaves_the_change_running_with_the_same_hint(cloud: world.BackgroundWorld) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBOT_", "KUBECONFIG", "AWS_"))}
    env |= {"GPUBOT_CLOUD_POLL_SECONDS": "0.1"}
    command = [sys.executable, "-m", "bot.cli", "pool", "create", *gke(cloud), "--max", "5"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # the first progress line: the Operation is under way
        assert first.startswith("Creating node pool gpu-pool ... RUNNING ("), first
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        assert process.wait(timeout=30) == 130
    finally:
        process.kill()
    assert "gpubot pool: stopped waiting (Ctrl-C). GKE carries on creating gpu-pool; check it with: " in rest
    assert "gcloud container operations describe operation-" in rest
    assert status_of(cloud, "gpu-pool") == "PROVISIONING"
