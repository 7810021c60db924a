"""The line from Kueue, with the real bot on the sim serving Kueue v0.19.2: a profile with `queue:` puts
its pods in a LocalQueue, and each waiting owner sees their place in Kueue's queue with an ETA from the
holders' leases, then "admitted by Kueue", then the mention when the pod runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from bot import runtime, settings
from bot.adapters import kube
from bot.adapters import kueue as kueue_adapter
from bot.core import doctor_kueue, labels, models
from bot.core.doctor_facts import Status
from bot.testing import stages
from sim.cluster import config, world
from sim.cluster import kueue as sim_kueue
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    WAIT,
    Json,
    advance_until,
    gpubot_pods,
    replies,
    roots,
    running_bot,
    timeline,
    wait_for_pods,
)

pytestmark = pytest.mark.usefixtures("slack_env")
NS = settings.DEFAULT_WORKLOAD_NAMESPACE
QUEUE = sim_kueue.LOCAL_QUEUE
PROFILES = f"""\
default: t4
profiles:
  t4:
    resource: nvidia.com/gpu
    tolerations:
      - {{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}}
    nodeSelector: {{app-type: gpu-workloads}}
    queue: {QUEUE}
"""


@pytest.fixture
def kueue_sim() -> Iterator[world.BackgroundWorld]:
    """The seed's cluster with Kueue installed and a ClusterQueue of 2 GPUs behind the LocalQueue."""
    with world.BackgroundWorld(
        world.WorldConfig(timings=config.instant_cloud(), kueue_gpu_quota=2)
    ) as running:
        yield running


@pytest.fixture
def kueue_bot(
    kueue_sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[runtime.Bot]:
    profiles_file = tmp_path / "profiles.yaml"
    profiles_file.write_text(PROFILES)
    base = stages.bot_settings(stages.Stage(kueue_sim, slack, redis_url, tmp_path), namespace=NS)
    configured = dataclasses.replace(
        base, profiles=settings.ProfileSettings(profiles_file=str(profiles_file))
    )
    with running_bot(configured, slack) as running:
        yield running


def root_of(sim: world.BackgroundWorld, slack: BackgroundSlack, user: str) -> Json:
    mine = [p for p in gpubot_pods(sim, NS) if p["metadata"]["labels"][labels.OWNER_LABEL] == user]
    ts = mine[-1]["metadata"]["annotations"][labels.THREAD_TS_ANNOTATION]
    (root,) = [r for r in roots(slack) if r["ts"] == ts]
    return root


def run(sim: world.BackgroundWorld, slack: BackgroundSlack, user: str, hours: int, count: int) -> None:
    slack.type_command(user, "C_GPU", "/gpu", f"run {CUDA} --hours {hours} -- sleep 86400")
    wait_for_pods(sim, slack, count, namespace=NS)


def test_kueues_quota_makes_the_line_and_admission_moves_it(
    kueue_sim: world.BackgroundWorld, slack: BackgroundSlack, kueue_bot: runtime.Bot
) -> None:
    sim = kueue_sim
    run(sim, slack, "U_ALICE", 4, 1)
    run(sim, slack, "U_BOB", 1, 2)
    (pod, *_) = gpubot_pods(sim, NS)
    assert pod["metadata"]["labels"][labels.KUEUE_QUEUE_LABEL] == QUEUE
    advance_until(sim, slack, lambda: "Running on" in root_of(sim, slack, "U_BOB")["text"])
    assert any("admitted by Kueue" in fact for fact in timeline(root_of(sim, slack, "U_BOB")))

    run(sim, slack, "U_ADMIN", 2, 3)
    ada = lambda: root_of(sim, slack, "U_ADMIN")["text"]  # noqa: E731
    line = f"(Kueue queue {QUEUE})"
    advance_until(sim, slack, lambda: f"Waiting for a GPU: #1 in line {line}, about 1h" in ada())
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "status")
    shown = lambda: [e["text"] for e in slack.ephemerals("U_ADMIN") if "*Your workloads*" in e["text"]]  # noqa: E731
    (report,) = slack.wait_until(shown, timeout=WAIT)
    assert f"waiting for quota in Kueue queue {QUEUE}" in report, report  # not "no node yet"
    assert "GPUs pending (waiting for a node): 0" in report, report
    assert "GPUs waiting for Kueue quota (not for a node): 1" in report, report
    quota = lambda: [r for r in replies(slack, root_of(sim, slack, "U_ADMIN")) if "quota in use" in r]  # noqa: E731
    (warned,) = slack.wait_until(quota, timeout=WAIT)
    assert "pool" not in warned, warned  # Kueue's quota, not the pool's maximum

    slack.type_command("U_BOB", "C_GPU", "/gpu", "release all")
    advance_until(sim, slack, lambda: "Running on" in ada())
    facts = timeline(root_of(sim, slack, "U_ADMIN"))
    assert any("admitted by Kueue" in fact for fact in facts), facts
    running = lambda: [r for r in replies(slack, root_of(sim, slack, "U_ADMIN")) if "Running on" in r]  # noqa: E731
    (told,) = slack.wait_until(running, timeout=WAIT)
    assert told.startswith("<@U_ADMIN> Running on "), told


def test_doctor_reads_kueues_queues_and_says_what_is_missing(kueue_sim: world.BackgroundWorld) -> None:
    """Against a cluster with Kueue the queue checks pass, or name the missing LocalQueue."""
    profiles = {
        "t4": models.GpuProfile("t4", queue=QUEUE),
        "spare": models.GpuProfile("spare", queue="no-such-queue"),
    }
    with_kueue = kube.KubeCluster(client.ApiClient(client.Configuration(host=kueue_sim.url)), namespace=NS)
    facts = kueue_adapter.KueueWatch(with_kueue).read_facts()
    checks = {c.name: c for c in doctor_kueue.kueue_checks(profiles, facts, NS)}
    assert checks["kueue-t4"].status is Status.PASS, checks["kueue-t4"]
    assert f"ClusterQueue {sim_kueue.CLUSTER_QUEUE}, 2 nvidia.com/gpu" in checks["kueue-t4"].message
    assert checks["kueue-spare"].status is Status.FAIL
    assert "no LocalQueue no-such-queue" in checks["kueue-spare"].message
