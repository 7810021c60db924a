"""Decoding writes against the client's models: unknown fields, Go type errors, quantities, client checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes.client import ApiClient

from sim import seed
from sim.cluster import errors, resources, schema

SEED: dict[str, Any] = seed.seed_pod(corrected=False)


def test_seed_manifest_has_exactly_one_unknown_field() -> None:
    assert schema.unknown_fields("V1Pod", SEED) == ["spec.tolerations[0].important"]
    assert schema.type_errors("V1Pod", SEED) == []


def test_drop_unknown_fields_keeps_everything_known_and_copies() -> None:
    original = copy.deepcopy(SEED)
    dropped = schema.drop_unknown_fields("V1Pod", SEED)
    assert dropped["spec"]["tolerations"] == [
        {"operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert dropped["spec"]["nodeSelector"] == {"app-type": "gpu-workloads"}
    assert schema.unknown_fields("V1Pod", dropped) == []
    assert original == SEED


@pytest.mark.parametrize(
    ("model", "obj", "expected"),
    [
        ("V1Pod", {"metadata": {"foo": 1}}, ["metadata.foo"]),
        (
            "V1Pod",
            {"spec": {"containers": [{"name": "a"}, {"resources": {"limitz": {}}}]}},
            ["spec.containers[1].resources.limitz"],
        ),
        ("V1Pod", {"spec": {"restartpolicy": "Never"}}, ["spec.restartpolicy"]),  # case-sensitive
        (
            "V1Pod",
            {"metadata": {"labels": {"anything": "x"}, "managedFields": [{"fieldsV1": {"f:x": {}}}]}},
            [],
        ),
        ("V1Node", {"spec": {"taints": [{"key": "k", "efect": "NoSchedule"}]}}, ["spec.taints[0].efect"]),
        ("V1ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}, "extra": 1}, ["extra"]),
    ],
)
def test_unknown_fields(model: str, obj: dict[str, Any], expected: list[str]) -> None:
    assert schema.unknown_fields(model, obj) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "80"}]}]}},
            "json: cannot unmarshal string into Go struct field "
            "ContainerPort.spec.containers.ports.containerPort of type int32",
        ),
        (
            {"metadata": {"labels": {"shot": 1}}},
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            {"spec": {"containers": [{"name": "a", "ports": [80]}]}},
            "json: cannot unmarshal number into Go struct field Container.spec.containers.ports"
            " of type v1.ContainerPort",
        ),
        (
            {"spec": {"containers": [{"name": "a", "command": "sleep 1"}]}},
            "json: cannot unmarshal string into Go struct field "
            "Container.spec.containers.command of type []string",
        ),
        (
            {"spec": {"activeDeadlineSeconds": 1.5}},
            "json: cannot unmarshal number 1.5 into Go struct field "
            "PodSpec.spec.activeDeadlineSeconds of type int64",
        ),
        (
            {"spec": {"tolerations": [{"operator": 1}]}},
            "json: cannot unmarshal number into Go struct field Toleration.spec.tolerations.operator"
            " of type v1.TolerationOperator",
        ),
        (
            {"spec": {"hostNetwork": "true"}},
            "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool",
        ),
    ],
)
def test_type_errors_use_go_decoder_wording(obj: dict[str, Any], expected: str) -> None:
    assert schema.type_errors("V1Pod", obj) == [expected]


def test_config_map_data_number_is_a_type_error() -> None:
    errs = schema.type_errors("V1ConfigMap", {"data": {"port": 8080}})
    assert errs == ["json: cannot unmarshal number into Go struct field ConfigMap.data of type string"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2Gb", schema.QUANTITY_FORMAT_WRONG),
        ("25%", schema.QUANTITY_FORMAT_WRONG),
        (True, schema.QUANTITY_FORMAT_WRONG),
        ("32MMi", schema.QUANTITY_SUFFIX_WRONG),
        (1, None),
        (0.5, None),
        ("100m", None),
        ("1e3", None),
    ],
)
def test_quantity_errors_are_decode_errors(value: Any, expected: str | None) -> None:
    pod = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": value}}}]}}
    assert schema.type_errors("V1Pod", pod) == ([expected] if expected else [])


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0.5", "500m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1.5", "1500m"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("512Ki", "512Ki"),
        ("1e3", "1e3"),
        ("0.1n", "1n"),
        ("0", "0"),
        ("-1", "-1"),
    ],
)
def test_canonical_quantity_matches_quantity_string(text: str, canonical: str) -> None:
    assert schema.canonical_quantity(text) == canonical


def test_normalize_turns_quantity_numbers_into_strings_so_the_client_can_read_them() -> None:
    assert schema.check_client_model("V1Pod", SEED) is not None  # a number where the client wants a str
    normalized = schema.normalize("V1Pod", SEED)
    limits = normalized["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1"}
    assert "important" not in normalized["spec"]["tolerations"][0]
    assert schema.check_client_model("V1Pod", normalized) is None


def test_normalize_fixes_integral_floats_and_node_capacity() -> None:
    node = {"status": {"capacity": {"cpu": 8, "memory": "32Gi", "nvidia.com/gpu": 1}}}
    pod = {"spec": {"terminationGracePeriodSeconds": 30.0}}
    assert schema.normalize("V1Node", node)["status"]["capacity"] == {
        "cpu": "8",
        "memory": "32Gi",
        "nvidia.com/gpu": "1",
    }
    assert schema.normalize("V1Pod", pod)["spec"]["terminationGracePeriodSeconds"] == 30
    assert isinstance(schema.normalize("V1Pod", pod)["spec"]["terminationGracePeriodSeconds"], int)


def test_events_v1_event_without_event_time_is_unreadable_by_the_client() -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "default"},
    }
    failure = schema.check_client_model("EventsV1Event", event)
    assert failure is not None and "eventTime" in failure
    assert (
        schema.check_client_model("EventsV1Event", {**event, "eventTime": "2024-05-01T10:00:00.000000Z"})
        is None
    )


def test_core_event_without_involved_object_is_unreadable_by_the_client() -> None:
    failure = schema.check_client_model("CoreV1Event", {"metadata": {"name": "e"}})
    assert failure is not None and "involvedObject" in failure
    assert schema.check_client_model("CoreV1Event", {"metadata": {"name": "e"}, "involvedObject": {}}) is None


def test_check_client_model_agrees_with_the_clients_deserialize() -> None:
    bad = {"metadata": {"name": "x", "creationTimestamp": "yesterday"}}
    with pytest.raises(Exception, match="creationTimestamp"):
        ApiClient().deserialize(
            '{"metadata": {"name": "x", "creationTimestamp": "yesterday"}}', "V1Pod", None
        )
    assert schema.check_client_model("V1Pod", bad) is not None


@pytest.mark.parametrize(
    ("model", "present", "absent"),
    [
        ("CoreV1Event", {"involvedObject", "metadata", "metadata.ownerReferences[*].uid"}, {"reason"}),
        ("EventsV1Event", {"eventTime", "series.count", "series.lastObservedTime"}, {"metadata"}),
        ("V1Pod", {"spec.containers", "spec.containers[*].name"}, {"spec.tolerations[*].key", "metadata"}),
        ("V1Node", {"spec.taints[*].key", "spec.taints[*].effect", "status.conditions[*].type"}, {"spec"}),
    ],
)
def test_required_fields(model: str, present: set[str], absent: set[str]) -> None:
    found = set(schema.required_fields(model))
    assert present <= found
    assert not absent & found


def test_required_fields_are_really_required_by_the_client() -> None:
    for model in ("CoreV1Event", "EventsV1Event"):
        top_level = [p for p in schema.required_fields(model) if "." not in p]
        assert top_level
        for path in top_level:
            complete = {"involvedObject": {}, "metadata": {}, "eventTime": "2024-05-01T10:00:00Z"}
            missing = {k: v for k, v in complete.items() if k != path}
            assert schema.check_client_model(model, complete) is None
            assert schema.check_client_model(model, missing) is not None


def test_decode_strict_refuses_with_the_apiserver_message() -> None:
    with pytest.raises(errors.ApiError) as caught:
        schema.decode(resources.PODS, SEED, "Strict")
    assert caught.value.code == 400
    assert caught.value.message == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.tolerations[0].important"'
    )


def test_decode_warn_is_the_default_and_ignore_is_silent() -> None:
    warned = schema.decode(resources.PODS, SEED)
    assert warned.warnings == ('unknown field "spec.tolerations[0].important"',)
    assert (
        schema.warning_header(warned.warnings[0])
        == '299 - "unknown field \\"spec.tolerations[0].important\\""'
    )
    assert schema.decode(resources.PODS, SEED, "Ignore").warnings == ()
    assert warned.obj["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_decode_type_error_wins_over_unknown_fields() -> None:
    body = {"metadata": {"name": "x", "labels": {"a": 1}}, "bogus": True}
    with pytest.raises(errors.ApiError) as caught:
        schema.decode(resources.PODS, body, "Strict")
    assert caught.value.message == (
        'Pod in version "v1" cannot be handled as a Pod: '
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
    )
