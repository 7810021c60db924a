"""Merge, JSON and strategic merge patches give what the apiserver would store."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sim.cluster import patches


def make_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "labels": {"app": "gpu", "tier": "batch"}, "finalizers": ["a/one"]},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "args": ["--x"],
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]
        },
    }


def test_containers_merge_by_name() -> None:
    pod = make_pod()
    out = patches.strategic_merge_patch(pod, {"spec": {"containers": [{"name": "app", "image": "app:2"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["app", "sidecar"]
    assert out["spec"]["containers"][0]["image"] == "app:2"
    assert out["spec"]["containers"][0]["env"] == pod["spec"]["containers"][0]["env"]
    assert out["spec"]["containers"][1] == {"name": "sidecar", "image": "side:1"}


def test_env_merges_by_name_and_args_replace() -> None:
    patch = {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}], "args": ["--y"]}]}}
    app = patches.strategic_merge_patch(make_pod(), patch)["spec"]["containers"][0]
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert app["args"] == ["--y"]


def test_tolerations_are_replaced_wholesale() -> None:
    new = [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    out = patches.strategic_merge_patch(make_pod(), {"spec": {"tolerations": new}})
    assert out["spec"]["tolerations"] == new


def test_conditions_merge_by_type() -> None:
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    out = patches.strategic_merge_patch(make_pod(), patch)
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "Scheduled", "status": "True"},
    ]


def test_kubectl_apply_set_element_order_is_stripped_and_orders_the_list() -> None:
    # What `kubectl apply` sends after swapping the two containers and bumping the sidecar image.
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
            "containers": [{"name": "sidecar", "image": "side:2"}],
        },
    }
    out = patches.strategic_merge_patch(make_pod(), patch)
    assert not [key for key in out["spec"] if key.startswith("$")]
    assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "app"]
    assert out["spec"]["containers"][0]["image"] == "side:2"
    assert out["spec"]["containers"][1]["image"] == "app:1"
    assert out["metadata"]["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": "{}"}


def test_set_element_order_for_primitive_list() -> None:
    patch = {"metadata": {"$setElementOrder/finalizers": ["b/two", "a/one"], "finalizers": ["b/two"]}}
    out = patches.strategic_merge_patch(make_pod(), patch)
    assert out["metadata"]["finalizers"] == ["b/two", "a/one"]
    assert "$setElementOrder/finalizers" not in out["metadata"]


def test_set_element_order_must_cover_the_patch_list() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "app"}], "containers": [{"name": "other"}]}}
    with pytest.raises(patches.PatchError) as caught:
        patches.strategic_merge_patch(make_pod(), patch)
    assert caught.value.code == 400


def test_patch_delete_directive_removes_a_list_element() -> None:
    patch = {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    out = patches.strategic_merge_patch(make_pod(), patch)
    assert [c["name"] for c in out["spec"]["containers"]] == ["app"]


def test_patch_replace_directive_in_list_and_map() -> None:
    in_list = {"spec": {"containers": [{"name": "only", "image": "o:1"}, {"$patch": "replace"}]}}
    assert patches.strategic_merge_patch(make_pod(), in_list)["spec"]["containers"] == [
        {"name": "only", "image": "o:1"}
    ]
    in_map = {"metadata": {"labels": {"$patch": "replace", "new": "x"}}}
    assert patches.strategic_merge_patch(make_pod(), in_map)["metadata"]["labels"] == {"new": "x"}
    delete_map = {"metadata": {"labels": {"$patch": "delete"}}}
    assert patches.strategic_merge_patch(make_pod(), delete_map)["metadata"]["labels"] == {}


def test_null_removes_a_label_and_unknown_nulls_are_ignored() -> None:
    out = patches.strategic_merge_patch(make_pod(), {"metadata": {"labels": {"tier": None, "ghost": None}}})
    assert out["metadata"]["labels"] == {"app": "gpu"}


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    added = patches.strategic_merge_patch(make_pod(), {"metadata": {"finalizers": ["a/one", "b/two"]}})
    assert added["metadata"]["finalizers"] == ["a/one", "b/two"]
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/one"]}}
    removed = patches.strategic_merge_patch(added, patch)
    assert removed["metadata"]["finalizers"] == ["b/two"]
    assert "$deleteFromPrimitiveList/finalizers" not in removed["metadata"]


def test_retain_keys_drops_unlisted_keys() -> None:
    target = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert patches.strategic_merge_patch(target, patch) == {"spec": {"strategy": {"type": "Recreate"}}}
    bad = {"spec": {"strategy": {"$retainKeys": ["type"], "other": 1}}}
    with pytest.raises(patches.PatchError, match="invalid patch format of retainKeys"):
        patches.strategic_merge_patch(target, bad)


def test_new_fields_lose_their_directives() -> None:
    patch = {
        "spec": {"volumes": [{"name": "v", "emptyDir": {}, "x": None}, {"name": "gone", "$patch": "delete"}]}
    }
    out = patches.strategic_merge_patch({"spec": {}}, patch)
    assert out["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]


def test_strategic_errors() -> None:
    with pytest.raises(patches.PatchError, match="does not contain declared merge key: name") as caught:
        patches.strategic_merge_patch(make_pod(), {"spec": {"containers": [{"image": "x"}]}})
    assert caught.value.code == 422
    with pytest.raises(patches.PatchError) as bad_body:
        patches.strategic_merge_patch(make_pod(), [{"op": "add"}])
    assert bad_body.value.code == 400


def test_strategic_merge_never_mutates_inputs() -> None:
    pod = make_pod()
    patch = {
        "spec": {"$setElementOrder/containers": [{"name": "app"}], "containers": [{"name": "app", "x": 1}]}
    }
    before_pod, before_patch = copy.deepcopy(pod), copy.deepcopy(patch)
    out = patches.strategic_merge_patch(pod, patch)
    out["spec"]["containers"][1]["image"] = "changed"
    assert pod == before_pod
    assert patch == before_patch


def test_merge_patch() -> None:
    pod = make_pod()
    out = patches.merge_patch(
        pod, {"metadata": {"labels": {"tier": None, "new": "1"}}, "spec": {"containers": []}}
    )
    assert out["metadata"]["labels"] == {"app": "gpu", "new": "1"}
    assert out["spec"]["containers"] == []
    assert pod == make_pod()
    with pytest.raises(patches.PatchError) as caught:
        patches.merge_patch(pod, ["not", "an", "object"])
    assert caught.value.code == 400


def test_json_patch_add_replace_remove() -> None:
    ops = [
        {"op": "add", "path": "/metadata/labels/new", "value": "1"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "app:9"},
        {"op": "remove", "path": "/metadata/labels/tier"},
        {"op": "test", "path": "/metadata/name", "value": "p"},
    ]
    pod = make_pod()
    out = patches.json_patch(pod, ops)
    assert out["metadata"]["labels"] == {"app": "gpu", "new": "1"}
    assert out["spec"]["containers"][0]["image"] == "app:9"
    assert pod == make_pod()


@pytest.mark.parametrize(
    ("ops", "message", "code"),
    [
        (
            [{"op": "test", "path": "/metadata/name", "value": "q"}],
            "testing value /metadata/name failed: test failed",
            422,
        ),
        (
            [{"op": "remove", "path": "/metadata/annotations"}],
            'remove operation does not apply: doc is missing path: "/metadata/annotations": missing value',
            422,
        ),
        (
            [{"op": "add", "path": "/nope/deeper", "value": 1}],
            'add operation does not apply: doc is missing path: "/nope/deeper": missing value',
            422,
        ),
        ([{"op": "frobnicate", "path": "/a"}], "Unexpected kind: frobnicate", 422),
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400),
    ],
)
def test_json_patch_failures(ops: Any, message: str, code: int) -> None:
    with pytest.raises(patches.PatchError) as caught:
        patches.json_patch(make_pod(), ops)
    assert str(caught.value) == message
    assert caught.value.code == code
