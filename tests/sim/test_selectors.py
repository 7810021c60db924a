"""Label and field selectors parse, fail and match as the apiserver's do."""

from __future__ import annotations

from typing import Any

import pytest

from sim.cluster import selectors

LABELS = {"app": "gpu", "tier": "batch", "example.com/team": "ml", "gpus": "4"}

LABEL_CASES = [
    ("", True),
    ("app=gpu", True),
    ("app==gpu", True),
    ("app=cpu", False),
    ("app!=cpu", True),
    ("app!=gpu", False),
    ("missing!=x", True),
    ("app in (cpu, gpu)", True),
    ("app in (cpu)", False),
    ("missing in (a)", False),
    ("app notin (cpu)", True),
    ("app notin (gpu,cpu)", False),
    ("missing notin (a)", True),
    ("tier", True),
    ("missing", False),
    ("!missing", True),
    ("!tier", False),
    ("example.com/team=ml", True),
    (" app = gpu , tier in ( batch ) ", True),
    ("app=gpu,tier=web", False),
    ("app in (gpu),tier notin (web),!missing", True),
    ("gpus>3", True),
    ("gpus<4", False),
    ("tier=", False),
    ("missing=", False),
    ("k in (in, notin)", False),
]


@pytest.mark.parametrize(("text", "expected"), LABEL_CASES)
def test_label_selector_matches(text: str, expected: bool) -> None:
    assert selectors.parse_label_selector(text).matches(LABELS) is expected


def test_label_selector_treats_no_labels_as_empty() -> None:
    assert selectors.parse_label_selector("!app").matches(None)
    assert not selectors.parse_label_selector("app").matches(None)


def test_label_selector_in_list_keeps_empty_slots_and_sorts_by_key() -> None:
    selector = selectors.parse_label_selector("z,x in (foo,,baz)")
    assert str(selector) == "x in (,baz,foo),z"
    assert selector.matches({"x": "", "z": "1"})


BAD_LABEL_CASES = [
    ("app in", "unable to parse requirement: found '' expected: '('"),
    ("app in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("app=a=b", "found '=', expected: ',' or 'end of string'"),
    ("app=a b", "found 'b', expected: ',' or 'end of string'"),
    (",app", "found ',', expected: !, identifier, or 'end of string'"),
    ("app,", "found '', expected: identifier after ','"),
    ("app=(", "unable to parse requirement: found '(', expected: identifier"),
    ("gpus>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators"),
    ("a:b=c", 'unable to parse requirement: <nil>: Invalid value: "a:b": name part must consist of'),
    ("Example.com/x", 'Invalid value: "Example.com/x": prefix part a lowercase RFC 1123 subdomain'),
    ("a=b:c", 'unable to parse requirement: values[0][a]: Invalid value: "b:c": a valid label must be'),
    ("a=" + "v" * 64, "must be no more than 63 characters"),
]


@pytest.mark.parametrize(("text", "message"), BAD_LABEL_CASES)
def test_label_selector_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(selectors.SelectorError) as caught:
        selectors.parse_label_selector(text)
    assert message in str(caught.value)


def test_label_key_error_carries_the_upstream_regex_text() -> None:
    with pytest.raises(selectors.SelectorError) as caught:
        selectors.parse_label_selector("a:b")
    assert "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is " in str(caught.value)


DICT_CASES: list[tuple[dict[str, Any] | None, dict[str, str], bool]] = [
    (None, {"app": "gpu"}, False),
    ({}, {"app": "gpu"}, True),
    ({"matchLabels": {"app": "gpu"}}, {"app": "gpu"}, True),
    ({"matchLabels": {"app": "gpu"}}, {"app": "cpu"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["gpu", "x"]}]}, {"app": "gpu"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["gpu"]}]}, {"app": "gpu"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {}, True),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), DICT_CASES)
def test_label_selector_from_dict(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert selectors.label_selector_from_dict(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            '"Gt" is not a valid label',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        ),
        ({"matchLabels": {"a b": "c"}}, 'key: Invalid value: "a b": name part must consist'),
    ],
)
def test_label_selector_from_dict_rejects_bad_requirements(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(selectors.SelectorError) as caught:
        selectors.label_selector_from_dict(selector)
    assert message in str(caught.value)


POD = {
    "metadata": {"name": "train-1", "namespace": "ml"},
    "spec": {"nodeName": "gpu-a", "restartPolicy": "Never", "priority": 5, "preemptible": True},
    "status": {"phase": "Running"},
}

FIELD_CASES = [
    ("", True),
    ("metadata.name=train-1", True),
    ("metadata.name==train-1", True),
    ("metadata.name=other", False),
    ("spec.nodeName!=gpu-b", True),
    ("spec.nodeName=gpu-a,status.phase!=Succeeded,status.phase!=Failed", True),
    ("spec.nodeName=gpu-a,status.phase=Pending", False),
    ("status.podIP=", True),
    ("status.podIP!=", False),
    ("spec.schedulerName=default-scheduler", False),
    ("spec.hostNetwork=false", True),
    ("spec.priority=5", True),
    ("spec.preemptible=true", True),
    ("spec.nodeName=", False),
    ("metadata.name=train-1,", True),
]


@pytest.mark.parametrize(("text", "expected"), FIELD_CASES)
def test_field_selector_matches(text: str, expected: bool) -> None:
    assert selectors.parse_field_selector(text).matches(POD) is expected


def test_field_selector_unescapes_values_and_round_trips() -> None:
    value = r"a,b=c\d"
    escaped = selectors.escape_field_value(value)
    assert escaped == r"a\,b\=c\\d"
    selector = selectors.parse_field_selector(f"reason={escaped},type!=Normal")
    assert selector.requirements[0].value == value
    assert selector.matches({"reason": value, "type": "Warning"})
    assert selectors.parse_field_selector(str(selector)) == selector


def test_field_selector_lists_fields_and_exact_matches() -> None:
    selector = selectors.parse_field_selector("spec.nodeName=n1,metadata.name!=x,spec.nodeName=n1")
    assert selector.fields() == ["metadata.name", "spec.nodeName"]
    assert selector.requires_exact_match("spec.nodeName") == "n1"
    assert selector.requires_exact_match("metadata.name") is None


def test_event_source_falls_back_to_reporting_component() -> None:
    selector = selectors.parse_field_selector("source=kubelet")
    assert selector.matches({"source": {"component": "kubelet"}})
    assert selector.matches({"source": {}, "reportingComponent": "kubelet"})
    assert not selector.matches({"source": {"component": "default-scheduler"}})


def test_node_unschedulable_defaults_to_false() -> None:
    selector = selectors.parse_field_selector("spec.unschedulable=false")
    assert selector.matches({"spec": {}})
    assert not selector.matches({"spec": {"unschedulable": True}})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        (r"a=b\x", r"invalid field selector: invalid escape sequence: \x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_field_selector_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(selectors.SelectorError) as caught:
        selectors.parse_field_selector(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("plural", "text", "supported"),
    [
        ("pods", "spec.nodeName=a,status.phase=Running,spec.hostNetwork=false", True),
        ("pods", "spec.nodeName=a,spec.containers=x", False),
        ("nodes", "spec.unschedulable=false,metadata.name=n", True),
        ("nodes", "metadata.namespace=x", False),
        ("events", "involvedObject.uid=u,reason=Scheduled,source=kubelet,type=Normal", True),
        ("events", "regarding.name=x", False),
        ("namespaces", "status.phase=Active", True),
        ("configmaps", "metadata.name=a,metadata.namespace=b", True),
        ("leases", "spec.holderIdentity=a", False),
    ],
)
def test_check_supported(plural: str, text: str, supported: bool) -> None:
    selector = selectors.parse_field_selector(text)
    if supported:
        selectors.check_supported(plural, selector)
        return
    with pytest.raises(selectors.SelectorError) as caught:
        selectors.check_supported(plural, selector)
    assert str(caught.value).startswith("field label not supported: ")
    assert str(caught.value).removeprefix("field label not supported: ") in text


def test_events_v1_selector_maps_to_core_names() -> None:
    selector = selectors.events_v1_to_core(
        selectors.parse_field_selector("regarding.name=p,reportingController=kubelet")
    )
    assert selector.fields() == ["involvedObject.name", "reportingComponent"]
    assert selector.matches({"involvedObject": {"name": "p"}, "reportingComponent": "kubelet"})
    with pytest.raises(selectors.SelectorError, match=r"field label not supported: involvedObject\.name"):
        selectors.events_v1_to_core(selectors.parse_field_selector("involvedObject.name=p"))
