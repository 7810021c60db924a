"""Pure rules behind eviction and request bodies: budget arithmetic, Go's JSON error words."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim.cluster import bodies, disruption, lifecycle


def pod(name: str, *, ready: bool = True, deleting: bool = False, app: str = "web") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"app": app}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def budget(**spec: Any) -> dict[str, Any]:
    selector = spec.pop("selector", {"matchLabels": {"app": "web"}})
    return {
        "metadata": {"name": "b", "namespace": "ns", "generation": 3},
        "spec": {"selector": selector, **spec},
    }


@pytest.mark.parametrize(
    ("spec", "expected", "desired"),
    [
        ({"minAvailable": 2}, 5, 2),
        ({"minAvailable": "50%"}, 5, 3),  # rounds up
        ({"maxUnavailable": 1}, 5, 4),
        ({"maxUnavailable": "30%"}, 5, 3),  # 1.5 unavailable rounds up to 2
        ({"maxUnavailable": 9}, 5, 0),
    ],
)
def test_desired_healthy(spec: dict[str, Any], expected: int, desired: int) -> None:
    assert disruption.desired_healthy(spec, expected) == desired


def test_status_counts_ready_pods_that_are_not_going() -> None:
    pods = [pod("a"), pod("b"), pod("c", ready=False), pod("d", deleting=True), pod("e", app="other")]
    status = disruption.compute_status(budget(minAvailable=1), pods, now="2026-01-01T00:00:00Z")
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"]) == (4, 2, 1)
    assert status["disruptionsAllowed"] == 1 and status["observedGeneration"] == 3
    assert status["conditions"][0]["reason"] == "SufficientPods"


def test_an_empty_selector_selects_nothing_for_a_budget() -> None:
    assert not disruption.selects(budget(minAvailable=1, selector={}), pod("a"))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{bad", "invalid character 'b' looking for beginning of object key string"),
        ("", "unexpected end of JSON input"),
        ('{"a" 1}', "invalid character '1' after object key"),
        ('{"a": 1 "b": 2}', "invalid character '\"' after object key:value pair"),
        ("[1 2]", "invalid character '2' after array element"),
        ("{} x", "invalid character 'x' after top-level value"),
        ('{"a": ', "unexpected end of JSON input"),
        ("nope", "invalid character 'o' in literal null (expecting 'u')"),
    ],
)
def test_go_json_error_words(text: str, words: str) -> None:
    with pytest.raises(json.JSONDecodeError) as err:
        json.loads(text)
    assert bodies.go_json_error(err.value) == words


def test_the_cordon_taint_follows_spec_unschedulable() -> None:
    node: dict[str, Any] = {"spec": {"unschedulable": True, "taints": [{"key": "x", "effect": "NoSchedule"}]}}
    assert lifecycle.wants_cordon_taint(node) is True
    lifecycle.sync_cordon_taint(node, now="T")
    assert node["spec"]["taints"][1] == {
        "key": "node.kubernetes.io/unschedulable",
        "effect": "NoSchedule",
        "timeAdded": "T",
    }
    assert lifecycle.wants_cordon_taint(node) is None
    node["spec"]["unschedulable"] = False
    lifecycle.sync_cordon_taint(node, now="T")
    assert node["spec"]["taints"] == [{"key": "x", "effect": "NoSchedule"}]
