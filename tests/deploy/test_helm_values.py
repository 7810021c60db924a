"""The chart's values: `helm lint --strict` over a matrix of them, and values.schema.json, which makes helm
refuse a wrong type or a misspelt key before anything reaches the cluster."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from bot import profiles as profiles_module
from bot.core import taints
from tests.deploy import chart

SCHEMA = json.loads((chart.CHART / "values.schema.json").read_text(encoding="utf-8"))
DEFAULTS = yaml.safe_load((chart.CHART / "values.yaml").read_text(encoding="utf-8"))
VALUES_REFERENCE = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
PARENT_ONLY = frozenset({"global"})
"""Schema properties values.yaml has no default for: a parent chart sets `global` for its subcharts."""


@pytest.mark.parametrize("name", sorted(chart.MATRIX))
def test_helm_lint_strict_passes(name: str) -> None:
    report = chart.lint(chart.MATRIX[name])
    assert "1 chart(s) linted, 0 chart(s) failed" in report
    assert "[WARNING]" not in report and "[ERROR]" not in report, report


@pytest.mark.parametrize("command", ["template", "lint"])
def test_a_wrong_type_is_refused_by_the_schema(command: str) -> None:
    arguments = [command, "gpubot", str(chart.CHART)] if command == "template" else ["lint", str(chart.CHART)]
    with pytest.raises(
        chart.HelmError, match=r"replicaCount: Invalid type\. Expected: integer, given: string"
    ):
        chart.helm_with_values([*arguments, "--set", "replicaCount=lots"], {})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCunt": 2}, r"\(root\): Additional property replicaCunt is not allowed"),
        ({"slack": {"botTokn": "xoxb-1"}}, "slack: Additional property botTokn is not allowed"),
        ({"slack": {"mode": "socketmode"}}, r"slack\.mode: slack\.mode must be one of the following"),
        ({"reaper": {"dryRun": "yes"}}, r"reaper\.dryRun: Invalid type\. Expected: boolean, given: string"),
        ({"profiles": {"profiles": {"t4": {"maxGpus": 2}}}}, "Additional property maxGpus is not allowed"),
        ({"slack": {"teamIds": "T0ML"}}, r"slack\.teamIds: Invalid type\. Expected: array, given: string"),
        ({"slack": {"teamIds": ["U0ALICE"]}}, r"slack\.teamIds\.0: Does not match pattern"),
        ({"slack": {"enterpriseIds": ["T0ML"]}}, r"slack\.enterpriseIds\.0: Does not match pattern"),
    ],
)
def test_a_misspelt_key_or_a_wrong_value_is_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(chart.HelmError, match=message):
        chart.render(values)


def schema_mismatches(schema: dict[str, Any], defaults: Any, path: str) -> list[str]:
    """Keys of values.yaml the schema leaves untyped, and schema properties values.yaml lacks."""
    if "type" not in schema:
        return [f"{path or '(root)'} has no type"]
    properties = schema.get("properties")
    if properties is None or not isinstance(defaults, dict):
        return []
    problems = [
        f"{path}.{key} is in the schema, not in values.yaml" for key in properties.keys() - defaults.keys()
    ]
    problems += [
        f"{path}.{key} is in values.yaml, not in the schema" for key in defaults.keys() - properties.keys()
    ]
    for key in properties.keys() & defaults.keys():
        problems += schema_mismatches(properties[key], defaults[key], f"{path}.{key}")
    return problems


def test_the_schema_types_exactly_the_keys_of_values_yaml() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert SCHEMA["additionalProperties"] is False
    assert SCHEMA["properties"].keys() >= PARENT_ONLY
    without_parent = {
        **SCHEMA,
        "properties": {k: v for k, v in SCHEMA["properties"].items() if k not in PARENT_ONLY},
    }
    assert schema_mismatches(without_parent, DEFAULTS, "") == []


def test_a_profile_in_the_schema_has_the_fields_the_bot_reads() -> None:
    profile = SCHEMA["properties"]["profiles"]["properties"]["profiles"]["additionalProperties"]
    assert set(profile["properties"]) == profiles_module.PROFILE_FIELDS
    toleration = profile["properties"]["tolerations"]["items"]
    assert set(toleration["properties"]) == taints.TOLERATION_FIELDS


def test_every_value_a_template_reads_is_in_values_yaml() -> None:
    """helm renders a value missing from values.yaml as empty, so a misspelt `.Values` path would pass."""
    sources = sorted(p for p in (chart.CHART / "templates").iterdir() if p.is_file())
    missing = []
    for source in sources:
        for reference in VALUES_REFERENCE.findall(source.read_text(encoding="utf-8")):
            node: Any = DEFAULTS
            for key in reference.strip(".").split("."):
                if not isinstance(node, dict) or key not in node:
                    missing.append(f"{source.name}: .Values{reference}")
                    break
                node = node[key]
    assert sources and not missing, missing
