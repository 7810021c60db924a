"""Semantic validation: upstream field paths and messages, and the 422 envelope they end up in."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sim import seed
from sim.cluster import errors, messages, schema, validation

SEED: dict[str, Any] = seed.seed_pod(corrected=False)

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def decoded_pod(**spec_changes: Any) -> dict[str, Any]:
    """The seed pod as the server holds it after decoding: namespace filled in, unknown fields dropped."""
    pod = schema.normalize("V1Pod", schema.drop_unknown_fields("V1Pod", SEED))
    pod["metadata"]["namespace"] = "default"
    pod["spec"].update(spec_changes)
    return pod


def fixed_pod(**spec_changes: Any) -> dict[str, Any]:
    pod = decoded_pod(**spec_changes)
    pod["spec"]["tolerations"][0]["key"] = "nvidia.com/gpu"
    return pod


def fields_and_messages(causes: list[errors.Cause]) -> list[tuple[str, str]]:
    return [(c.field, c.message) for c in causes]


def test_seed_manifest_is_refused_as_a_real_cluster_refuses_it() -> None:
    causes = validation.validate("pods", decoded_pod())
    expected_message = f'Invalid value: "Equal": {messages.TOLERATION_EMPTY_KEY}'
    assert causes == [errors.Cause("FieldValueInvalid", "spec.tolerations[0].operator", expected_message)]
    status = errors.invalid("Pod", "gpu-pod", causes).status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == (
        'Pod "gpu-pod" is invalid: spec.tolerations[0].operator: Invalid value: "Equal": operator must be '
        'Exists when `key` is empty, which means "match all values and all keys"'
    )
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": expected_message, "field": "spec.tolerations[0].operator"}
    ]


def test_corrected_seed_manifest_passes_decoding_and_validation() -> None:
    corrected = copy.deepcopy(SEED)
    corrected["spec"]["tolerations"][0] = {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    }
    assert schema.unknown_fields("V1Pod", corrected) == []
    assert schema.type_errors("V1Pod", corrected) == []
    pod = schema.normalize("V1Pod", corrected)
    pod["metadata"]["namespace"] = "default"
    assert validation.validate("pods", pod) == []
    assert schema.check_client_model("V1Pod", pod) is None


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"namespace": "default"}, [("metadata.name", "Required value: name or generateName is required")]),
        (
            {"name": "GPU_pod", "namespace": "default"},
            [("metadata.name", f'Invalid value: "GPU_pod": {SUBDOMAIN_MSG}')],
        ),
        ({"name": "a.b-c", "namespace": "default"}, []),
        ({"name": "ok"}, [("metadata.namespace", "Required value")]),
        (
            {"name": "ok", "namespace": "default", "labels": {"bad key!": "v"}},
            [("metadata.labels", f'Invalid value: "bad key!": {NAME_PART_MSG}')],
        ),
        (
            {"name": "ok", "namespace": "default", "labels": {"team": "-ml"}},
            [("metadata.labels", f'Invalid value: "-ml": {LABEL_VALUE_MSG}')],
        ),
        (
            {"name": "ok", "namespace": "default", "labels": {"a/b/c": ""}},
            [
                (
                    "metadata.labels",
                    'Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '
                    "'-', '_' or '.', and must start and end with an alphanumeric character "
                    "(e.g. 'MyName',  or 'my.name',  or '123-abc', "
                    "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                    "[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                )
            ],
        ),
        (
            {"name": "ok", "namespace": "default", "annotations": {"big": "x" * (256 * 1024)}},
            [("metadata.annotations", "Too long: may not be more than 262144 bytes")],
        ),
    ],
)
def test_object_meta(metadata: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    pod = fixed_pod()
    pod["metadata"] = metadata
    assert fields_and_messages(validation.validate("pods", pod)) == expected


def test_label_value_too_long_gives_both_upstream_messages() -> None:
    pod = fixed_pod(nodeSelector={"pool": "x" * 64})
    assert [c.message.split(": ", 2)[2] for c in validation.validate("pods", pod)] == [
        "must be no more than 63 characters"
    ]


def test_namespace_names_are_labels_not_subdomains() -> None:
    causes = validation.validate("namespaces", {"metadata": {"name": "ml.team"}})
    assert fields_and_messages(causes) == [("metadata.name", f'Invalid value: "ml.team": {LABEL_MSG}')]
    forbidden = validation.validate("namespaces", {"metadata": {"name": "ml", "namespace": "x"}})
    assert fields_and_messages(forbidden) == [("metadata.namespace", "Forbidden: not allowed on this type")]


CONTAINER = {"name": "main", "image": "busybox"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": []}, [("spec.containers", "Required value")]),
        ({"containers": [{"image": "busybox"}]}, [("spec.containers[0].name", "Required value")]),
        ({"containers": [{"name": "main"}]}, [("spec.containers[0].image", "Required value")]),
        (
            {"containers": [CONTAINER, CONTAINER]},
            [("spec.containers[1].name", 'Duplicate value: "main"')],
        ),
        (
            {"containers": [{"name": "Main", "image": "busybox"}]},
            [("spec.containers[0].name", f'Invalid value: "Main": {LABEL_MSG}')],
        ),
        (
            {"containers": [CONTAINER], "restartPolicy": "Sometimes"},
            [
                (
                    "spec.restartPolicy",
                    'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
                )
            ],
        ),
        (
            {"containers": [CONTAINER], "activeDeadlineSeconds": 0},
            [("spec.activeDeadlineSeconds", "Invalid value: 0: must be between 1 and 2147483647, inclusive")],
        ),
        (
            {"containers": [{**CONTAINER, "ports": [{"containerPort": 70000}]}]},
            [
                (
                    "spec.containers[0].ports[0].containerPort",
                    "Invalid value: 70000: must be between 1 and 65535, inclusive",
                )
            ],
        ),
    ],
)
def test_pod_spec(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}
    assert fields_and_messages(validation.validate("pods", pod)) == expected


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"operator": "Exists"}, []),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, []),
        (
            {"key": "k", "operator": "In", "value": "v"},
            [
                (
                    "spec.tolerations[0].operator",
                    'Unsupported value: "In": supported values: "Equal", "Exists"',
                )
            ],
        ),
        (
            {"key": "k", "operator": "Exists", "value": "v"},
            [
                (
                    "spec.tolerations[0].operator",
                    'Invalid value: core.Toleration{Key:"k", Operator:"Exists", Value:"v", Effect:"", '
                    f"TolerationSeconds:(*int64)(nil)}}: {messages.TOLERATION_EXISTS_VALUE}",
                )
            ],
        ),
        (
            {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30},
            [
                (
                    "spec.tolerations[0].effect",
                    f'Invalid value: "NoSchedule": {messages.TOLERATION_SECONDS_EFFECT}',
                )
            ],
        ),
        (
            {"key": "k", "operator": "Exists", "effect": "NoScheduled"},
            [
                (
                    "spec.tolerations[0].effect",
                    'Unsupported value: "NoScheduled": supported values: "NoSchedule", "PreferNoSchedule", '
                    '"NoExecute"',
                )
            ],
        ),
        (
            {"key": "bad key", "operator": "Exists"},
            [("spec.tolerations[0].key", f'Invalid value: "bad key": {NAME_PART_MSG}')],
        ),
        (
            {"key": "k", "value": "not valid!"},  # upstream reports value errors on `operator`
            [("spec.tolerations[0].operator", f'Invalid value: "not valid!": {LABEL_VALUE_MSG}')],
        ),
    ],
)
def test_tolerations(toleration: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [CONTAINER], "tolerations": [toleration]},
    }
    assert fields_and_messages(validation.validate("pods", pod)) == expected


def resources_pod(
    limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if limits is not None:
        res["limits"] = limits
    if requests is not None:
        res["requests"] = requests
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{**CONTAINER, "resources": res}]},
    }


RES = "spec.containers[0].resources"


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "500m", "memory": "512Mi"}, []),
        ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"}, []),
        (
            {"cpu": "1"},
            {"cpu": "2"},
            [(f"{RES}.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1')],
        ),
        (
            {"memory": "1Gi"},
            {"memory": "2048Mi"},
            [(f"{RES}.requests", 'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi')],
        ),
        (
            {"nvidia.com/gpu": "2"},
            {"nvidia.com/gpu": "1"},
            [(f"{RES}.requests", 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')],
        ),
        (
            None,
            {"nvidia.com/gpu": "1"},
            [(f"{RES}.limits", "Required value: Limit must be set for non overcommitable resources")],
        ),
        (
            {"nvidia.com/gpu": "500m"},
            None,
            [
                (
                    f"{RES}.limits[nvidia.com/gpu]",
                    "Invalid value: resource.Quantity{i:resource.int64Amount{value:500, scale:-3}, "
                    'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"500m", Format:"DecimalSI"}: '
                    "must be an integer",
                )
            ],
        ),
        (
            {"cpu": "-1"},
            None,
            [(f"{RES}.limits[cpu]", 'Invalid value: "-1": must be greater than or equal to 0')],
        ),
        (
            {"gpu": "1"},
            None,
            [(f"{RES}.limits[gpu]", 'Invalid value: "gpu": must be a standard resource for containers')],
        ),
    ],
)
def test_resources(
    limits: dict[str, Any] | None, requests: dict[str, Any] | None, expected: list[tuple[str, str]]
) -> None:
    pod = schema.normalize("V1Pod", resources_pod(limits, requests))
    assert fields_and_messages(validation.validate("pods", pod)) == expected


def stored_pod() -> dict[str, Any]:
    pod = fixed_pod()
    pod["metadata"]["uid"] = "1234"
    return pod


def test_pod_update_allows_image_deadline_and_added_tolerations() -> None:
    old = stored_pod()
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "nvidia/cuda:12.4.0-base-ubuntu22.04"
    new["spec"]["activeDeadlineSeconds"] = 600
    new["spec"]["tolerations"].append({"key": "spot", "operator": "Exists"})
    assert validation.validate("pods", new, old=old) == []


def test_pod_update_forbids_other_spec_changes() -> None:
    old = stored_pod()
    new = copy.deepcopy(old)
    new["spec"]["nodeSelector"] = {"app-type": "cpu"}
    [cause] = validation.validate("pods", new, old=old)
    assert cause.field == "spec" and cause.reason == "FieldValueForbidden"
    assert cause.message.startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    )
    assert json.dumps({"app-type": "cpu"}) in cause.message


def test_pod_update_forbids_changing_an_existing_toleration_and_the_name() -> None:
    old = stored_pod()
    new = copy.deepcopy(old)
    new["spec"]["tolerations"][0]["value"] = "absent"
    new["metadata"]["name"] = "other"
    causes = fields_and_messages(validation.validate("pods", new, old=old))
    assert (
        "spec.tolerations",
        "Forbidden: existing toleration can not be modified except its tolerationSeconds",
    ) in causes
    assert ("metadata.name", 'Invalid value: "other": field is immutable') in causes


@pytest.mark.parametrize(
    ("taint", "expected"),
    [
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, []),
        (
            {"key": "k", "effect": ""},
            [
                ("spec.taints[0].effect", "Required value"),
                (
                    "spec.taints[0].effect",
                    'Unsupported value: "": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
                ),
            ],
        ),
        (
            {"key": "bad key", "effect": "NoExecute"},
            [("spec.taints[0].key", f'Invalid value: "bad key": {NAME_PART_MSG}')],
        ),
    ],
)
def test_node_taints(taint: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    node = {"metadata": {"name": "gke-gpu-pool-1"}, "spec": {"taints": [taint]}}
    assert fields_and_messages(validation.validate("nodes", node)) == expected


def test_duplicate_node_taints() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    node = {"metadata": {"name": "n"}, "spec": {"taints": [taint, taint]}}
    [cause] = validation.validate("nodes", node)
    assert cause.field == "spec.taints[1]" and cause.reason == "FieldValueDuplicate"
    assert cause.message.endswith(": taints must be unique by key and effect pair")


def test_config_map_keys() -> None:
    cm = {
        "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system"},
        "data": {"status": "x", "bad key": "y", "..x": "z"},
    }
    causes = fields_and_messages(validation.validate("configmaps", cm))
    assert causes == [
        ("data[..x]", "Invalid value: \"..x\": must not start with '..'"),
        (
            "data[bad key]",
            'Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '
            "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
            "regex used for validation is '[-._a-zA-Z0-9]+')",
        ),
    ]


def core_event(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "p.1", "namespace": "default"},
        **fields,
    }


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (core_event(involvedObject={"kind": "Pod", "name": "p", "namespace": "default"}), []),
        (core_event(), [("involvedObject", "Required value")]),
        (
            core_event(involvedObject={"kind": "Pod", "name": "p", "namespace": "ml"}),
            [("involvedObject.namespace", 'Invalid value: "ml": does not match event.namespace')],
        ),
        (
            core_event(
                involvedObject={"kind": "Pod", "name": "p", "namespace": "default"},
                eventTime="2024-05-01T10:00:00.000000Z",
                reportingComponent="kubelet",
            ),
            [
                ("reportingInstance", "Required value"),
                ("action", "Required value"),
                ("reason", "Required value"),
            ],
        ),
    ],
)
def test_core_events(event: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert fields_and_messages(validation.validate("events", event)) == expected


def test_events_v1_requires_event_time_and_type() -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "p.1", "namespace": "default"},
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-1",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
    }
    assert fields_and_messages(validation.validate("events", event)) == [("eventTime", "Required value")]
    event |= {"eventTime": "2024-05-01T10:00:00.000000Z", "type": "Critical"}
    assert fields_and_messages(validation.validate("events", event)) == [
        ("type", 'Invalid value: "": has invalid value: Critical')
    ]


def test_lease_duration_must_be_positive() -> None:
    lease = {
        "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"},
        "spec": {"leaseDurationSeconds": 0},
    }
    assert fields_and_messages(validation.validate("leases", lease)) == [
        ("spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0")
    ]
    lease["spec"] = {"leaseDurationSeconds": 15, "holderIdentity": "ca-1"}
    assert validation.validate("leases", lease) == []


def test_unknown_resource_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="secrets"):
        validation.validate("secrets", {})
