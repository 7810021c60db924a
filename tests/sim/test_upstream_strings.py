"""One Kubernetes version: every message the sim's controllers emit comes from sim/cluster/messages.py,
and every version the sim reports is that table's pinned one."""

from __future__ import annotations

import re

import requests
from kubernetes import client

from sim.cluster import messages, world
from tests.sim.test_scenarios import GPU_POOL, events_of, gpu_pod, pod

ANY = "\x00"
"""Stands for any argument when a table function is turned into a pattern."""


def pattern(text: str, *numbers: str) -> re.Pattern[str]:
    """A table message with ANY (and the given stand-in numbers) matching whatever was filled in."""
    for number in numbers:
        text = text.replace(number, "\x01")
    escaped = re.escape(text).replace(re.escape("\x01"), r"[0-9.hms]+")
    # an argument is any text not ending in "." (so a doubled "." at the end is never taken for one)
    return re.compile(escaped.replace(re.escape(ANY), r".*?[^.]") + r"\Z")


TEMPLATES = [
    pattern(messages.successfully_assigned(ANY, ANY, ANY)),
    pattern(messages.fit_error(7, [ANY], [ANY]), "7", "1"),
    pattern(messages.pulling(ANY)),
    pattern(messages.pulled(ANY, 987.0, 654321), "16m27s", "654321"),
    pattern(messages.already_present(ANY)),
    pattern(messages.pull_failed(ANY, ANY)),
    pattern(messages.ERR_IMAGE_PULL),
    pattern(messages.IMAGE_PULL_BACKOFF),
    pattern(messages.back_off_pulling(ANY)),
    pattern(messages.created_container(ANY)),
    pattern(messages.started_container(ANY)),
    pattern(messages.stopping_container(ANY)),
    pattern(messages.back_off_restarting(ANY, ANY, ANY, ANY)),
    pattern(messages.STARTING_KUBELET),
    pattern(messages.ALLOCATABLE_ENFORCED),
    pattern(messages.node_status_now(ANY, ANY)),
    pattern(messages.registered_node(ANY)),
    pattern(messages.triggered_scale_up([messages.scale_up_info(ANY, 7, 8, 9)]), "7", "8", "9"),
    pattern(messages.not_triggered_scale_up([ANY]), "1"),
    pattern(messages.scaled_up_group(ANY, 7, 8, 9), "7", "8", "9"),
    pattern(messages.scaled_up_group_done(ANY, 7, 8, 9), "7", "8", "9"),
    pattern(messages.SCALE_DOWN_MARKED),
    pattern(messages.SCALE_DOWN_REMOVED),
    pattern(messages.scale_down_empty(ANY)),
    pattern(messages.scale_down_empty_removed(ANY)),
]


def from_table(message: str) -> bool:
    return any(template.match(message) for template in TEMPLATES)


def test_the_templates_tell_table_messages_from_others() -> None:
    assert from_table(messages.created_container("main"))
    assert not from_table("Created container main")  # the pre-colon form
    assert from_table(
        messages.fit_error(3, ["Insufficient nvidia.com/gpu"], [messages.NO_PREEMPTION_VICTIMS])
    )
    assert not from_table(messages.fit_error(3, ["x"], ["y"]) + ".")  # the `..` of older releases


def test_every_event_of_a_day_on_the_cluster_comes_from_the_table(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", gpu_pod("trainer", command=["sleep", "120"], restart="Never"))
    core.create_namespaced_pod("default", pod("typo", image="busybox-notfound:1"))
    core.create_namespaced_pod("default", pod("crasher", command=["false"]))
    sim.advance(400, step=5)
    core.delete_namespaced_pod("crasher", "default")
    sim.advance(1500, step=10)  # the GPU node empties, waits out its unneeded time, and goes

    found = core.list_event_for_all_namespaces().items
    reasons = {e.reason for e in found}
    assert {"FailedScheduling", "TriggeredScaleUp", "ScaledUpGroup", "Started", "BackOff"} <= reasons
    assert {"Failed", "Killing", "RegisteredNode", "NodeReady", "ScaleDown", "ScaleDownEmpty"} <= reasons
    strays = sorted({(e.reason, e.message) for e in found if not from_table(e.message)})
    assert strays == []
    pull = next(e for e in events_of(core, "typo") if e.reason == "Failed" and "rpc error" in e.message)
    waiting = core.read_namespaced_pod("typo", "default").status.container_statuses[0].state.waiting
    assert waiting.reason in ("ErrImagePull", "ImagePullBackOff")
    assert waiting.message.endswith(
        pull.message.split(": ", 1)[1]
    )  # the runtime's words, as kubelet keeps them


def test_every_version_the_cluster_reports_is_the_pinned_one(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    served = requests.get(f"{sim.url}/version", timeout=10).json()
    assert (served["major"], served["minor"], served["gitVersion"]) == (
        "1",
        messages.KUBERNETES_VERSION.split(".")[1],
        messages.GIT_VERSION,
    )
    assert served["gitVersion"].startswith(messages.KUBERNETES_VERSION + "-")
    kubelets = {n.status.node_info.kubelet_version for n in core.list_node().items}
    assert kubelets == {messages.GIT_VERSION}
    pool = sim.run(lambda: sim.world.registry.get(GPU_POOL))
    assert "v" + pool.version == messages.GIT_VERSION
