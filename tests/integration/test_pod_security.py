"""Workloads in their own namespace under Pod Security "restricted", with the real bot on the sim.

The bot runs with the product's defaults (`gpubot-workloads`, which the sim, like the chart, labels
`pod-security.kubernetes.io/enforce: restricted`). A default run is admitted; a run of a profile that
opts into root is refused by the sim's admission with the upstream words, and the owner reads why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import app, settings
from bot.core import labels
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, Json, bot_settings, running_bot, the_root, wait_for_pods

NAMESPACE = settings.DEFAULT_WORKLOAD_NAMESPACE
PROFILES = """\
default: t4
profiles:
  t4:
    tolerations:
      - {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}
    nodeSelector: {app-type: gpu-workloads}
  cuda-root:
    tolerations:
      - {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}
    nodeSelector: {app-type: gpu-workloads}
    security: {runAsRoot: true}
"""


@pytest.fixture
def restricted_bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[app.Bot]:
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(PROFILES)
    config = bot_settings(sim, slack, tmp_path, redis_url)
    config = dataclasses.replace(
        config,
        cluster=dataclasses.replace(config.cluster, namespace=settings.ClusterSettings().namespace),
        profiles=settings.ProfileSettings(profiles_file=str(profiles)),
    )
    with running_bot(config, slack) as bot:
        yield bot


def workload_pods(sim: world.BackgroundWorld) -> list[Json]:
    return [
        p
        for p in sim.pods(NAMESPACE)
        if p["metadata"]["labels"].get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
    ]


def test_the_default_namespace_enforces_restricted(
    sim: world.BackgroundWorld, restricted_bot: app.Bot
) -> None:
    assert restricted_bot.cluster.namespace == NAMESPACE == "gpubot-workloads"
    namespace = sim.run(lambda: sim.world.store.get("namespaces", "", NAMESPACE))
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_a_default_run_is_admitted_in_the_restricted_namespace(
    sim: world.BackgroundWorld, slack: BackgroundSlack, restricted_bot: app.Bot
) -> None:
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} -- sleep 3600").acked
    (pod,) = wait_for_pods(sim, slack, namespace=NAMESPACE)  # no Slack call marks its creation
    assert pod["metadata"]["namespace"] == NAMESPACE
    assert pod["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert sim.pods("default") == []


def test_a_root_profile_is_refused_and_its_owner_told_why(
    sim: world.BackgroundWorld, slack: BackgroundSlack, restricted_bot: app.Bot
) -> None:
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} --type cuda-root -- sleep 3600").acked

    def refused() -> str:
        text = str(the_root(slack).get("text", "")) if slack.messages("C_GPU") else ""
        return text if "refused" in text else ""

    text = slack.wait_until(refused, timeout=WAIT)
    assert "the `cuda-root` profile runs its images as root" in text
    assert "`gpubot-workloads` only admits pods that run as a non-root user" in text
    assert "Pod Security level `baseline`" in text and "Nothing was created" in text
    # The API server's own words follow, as the real PodSecurity admission plugin writes them.
    assert (
        'is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true (pod or container '
        in text
    )
    assert '"workload" must set securityContext.runAsNonRoot=true)' in text
    assert workload_pods(sim) == []
