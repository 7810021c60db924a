"""A GPU pool that does not drain after gpubot's last workload left: the scale channel's episode message
says why and what to do, end to end on the real bot, the sim's autoscaler and the Slack emulator.

The bot runs on the sim's clock, so "well after the workload left" is simulated minutes, not real ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bot import settings
from bot.adapters import kube
from bot.core import drain
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    Json,
    advance_until,
    bot_settings,
    gpubot_pods,
    roots,
    run_and_wait_for_thread,
    running_bot,
    step_reached,
)

pytestmark = pytest.mark.usefixtures("slack_env")
OPS = "C_OPS"
POOL = "gpu-pool"
POOL_LABEL = "cloud.google.com/gke-nodepool"
TICK = 0.05
"""Real seconds between timer rounds, so a test never waits long for one."""
QUESTION = f"Why isn't {POOL} draining?"


def ops_settings(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> settings.Settings:
    base = bot_settings(sim, slack, tmp_path, redis_url)
    return dataclasses.replace(base, slack=dataclasses.replace(base.slack, scale_channel=OPS))


def pool_nodes(sim: world.BackgroundWorld, pool: str = POOL) -> list[str]:
    return [n["metadata"]["name"] for n in sim.nodes() if n["metadata"]["labels"].get(POOL_LABEL) == pool]


def warning(message: Json) -> str:
    found = next((b for b in message["blocks"] if b.get("block_id") == "gpubot_warning"), None)
    return str(found["text"]["text"]) if found else ""


def said_why(slack: BackgroundSlack, *words: str) -> Callable[[], str]:
    """The episode message's answer, once it says all `words`."""

    def answer() -> str:
        for message in roots(slack, OPS):
            text = warning(message)
            if QUESTION in text and all(w in text for w in words):
                return text
        return ""

    return answer


def answers(episode: Json) -> set[str]:
    """Every distinct "why" the message showed across its edits."""
    shown = [warning(r) for r in episode["revisions"]] + [warning(episode)]
    return {text[text.index(QUESTION) :] for text in shown if QUESTION in text}


def release_alices_run(sim: world.BackgroundWorld, slack: BackgroundSlack) -> str:
    """Alice's workload scales the pool up, runs, and is released; returns the GPU node it ran on."""
    run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))
    (node,) = pool_nodes(sim)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    advance_until(sim, slack, lambda: not gpubot_pods(sim))
    return node


def notebook(node: str, annotations: dict[str, str]) -> dict[str, Any]:
    """Someone's pod put straight on the GPU node, tolerating its taint; gpubot did not make it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook", "annotations": annotations},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "86400"]}],
        },
    }


def test_a_pod_that_may_not_be_evicted_is_named_with_the_fix(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    core: client.CoreV1Api,
    tmp_path: Path,
    redis_url: str,
) -> None:
    config = ops_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack, clock=sim.world.clock.datetime, tick_seconds=TICK):
        node = release_alices_run(sim, slack)
        released = sim.run(sim.world.clock.now)
        core.create_namespaced_pod("default", notebook(node, {drain.SAFE_TO_EVICT: "false"}))
        why = advance_until(sim, slack, said_why(slack, "default/notebook"), limit=1800, stride=30)
        waited = sim.run(sim.world.clock.now) - released
        assert pool_nodes(sim) == [node], "the autoscaler must not remove a node it may not drain"
        assert waited >= config.reaper.drain_expected_minutes * 60 > sim.world.timings.scale_down_unneeded
        core.delete_namespaced_pod("notebook", "default")
        back_at_zero = lambda: any("back at 0" in m["text"] for m in roots(slack, OPS))  # noqa: E731
        advance_until(sim, slack, back_at_zero, limit=1800, stride=30)
    assert 'annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"' in why, why
    assert "will not evict it" in why and "Fix: delete it once done" in why, why
    assert "kubectl delete pod -n default notebook" in why, why
    assert "ScaleDown: NoCandidates" in why, why
    (episode,) = roots(slack, OPS)  # one message per episode, edited
    assert len(answers(episode)) == 1, answers(episode)  # said once, not re-asked on every tick
    assert "back at 0" in episode["text"] and QUESTION not in warning(episode)


def test_a_minimum_size_above_zero_is_said_to_keep_a_node(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    config = ops_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack, clock=sim.world.clock.datetime, tick_seconds=TICK):
        node = release_alices_run(sim, slack)
        sim.run(lambda: sim.world.registry.set_autoscaling(POOL, enabled=True, min_size=1, max_size=5))
        why = advance_until(sim, slack, said_why(slack, "minimum size"), limit=1800, stride=30)
        assert pool_nodes(sim) == [node], "the autoscaler must not go below the pool's minimum"
    assert "gpu-pool's minimum size is 1, so the autoscaler always keeps at least 1 node" in why, why
    assert "--min-nodes 0 --max-nodes 5" in why, why
    assert "notebook" not in why and "bare pod" not in why
    (episode,) = roots(slack, OPS)
    assert len(answers(episode)) == 1


def test_pods_on_nodes_are_listed_across_namespaces(
    sim: world.BackgroundWorld, core: client.CoreV1Api, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    world.write_kubeconfig(kubeconfig, sim.url)
    here, elsewhere = pool_nodes(sim, "default-pool")
    for namespace, name, node in [
        ("default", "a", here),
        ("kube-system", "b", here),
        ("default", "c", elsewhere),
    ]:
        manifest = notebook(node, {})
        manifest["metadata"]["name"] = name
        core.create_namespaced_pod(namespace, manifest)
    cluster = kube.KubeCluster.from_kubeconfig(str(kubeconfig), namespace="default")
    found = cluster.list_pods_on_nodes([here])
    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in found) == [
        ("default", "a"),
        ("kube-system", "b"),
    ]
    assert len(cluster.list_pods_on_nodes([here, elsewhere, here])) == 3
