"""The chart renderer: Go template semantics on small templates, and helm's output where helm exists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import chart, helmlite

SCOPE: dict[str, Any] = {
    "Values": {
        "name": "gpu",
        "empty": "",
        "hours": 4.0,
        "ratio": 0.5,
        "on": True,
        "off": False,
        "admins": ["U1", "U2"],
        "labels": {"b": "2", "a": "1"},
        "nested": {"port": 8080},
    },
    "Release": {"Name": "rel", "Namespace": "ns"},
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ .Values.name }}", "gpu"),
        ("{{ .Values.hours }} {{ .Values.ratio }} {{ .Values.nested.port }}", "4 0.5 8080"),
        ("{{ .Values.on | quote }} {{ .Values.hours | quote }}", '"true" "4"'),
        ('{{ .Values.empty | default "x" }}|{{ .Values.name | default "x" }}', "x|gpu"),
        ('{{ .Values.empty | default (printf "%s-leader" .Release.Name) }}', "rel-leader"),
        ('{{ join "," .Values.admins | quote }}', '"U1,U2"'),
        ("a:\n  {{- toYaml .Values.labels | nindent 2 }}", "a:\n  a: '1'\n  b: '2'"),
        ("x\n  {{- if .Values.on }}\n  yes\n  {{- end }}\nz", "x\n  yes\nz"),
        ("{{- if .Values.off }}yes{{- else }}no{{- end }}", "no"),
        ('{{- if eq .Values.name "gpu" }}eq{{ end }}', "eq"),
        ("{{- if not .Values.empty }}empty{{ end }}", "empty"),
        ("{{ if .Values.admins }}some{{ end }}{{ if .Values.empty }}none{{ end }}", "some"),
        ("a  {{- .Values.name -}}  b", "agpub"),
        ('{{ "x" | sha256sum }}', "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"),
    ],
)
def test_templates_render_as_go_and_sprig_do(template: str, expected: str) -> None:
    assert helmlite.render_template(template, SCOPE) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ .Values.nmae }}", r"\.Values\.nmae is not set"),
        ("{{ .Values.name.first }}", "is not a map"),
        ("{{ range .Values.admins }}x{{ end }}", "'range' is not supported"),
        ('{{ include "x" . }}', "'include' is not supported"),
        ("{{ lower .Values.name }}", "'lower' is not a function"),
        ("{{ if .Values.on }}x", "if without end"),
        ("{{ end }}", "end without if"),
        ("{{ .Values.labels }}", "use toYaml"),
        ('{{ required "set name, please" .Values.empty }}', "set name, please"),
        ("x\n{{ .Values.nested | quote }}", "template:2"),
    ],
)
def test_unsupported_or_wrong_templates_fail_loudly(template: str, message: str) -> None:
    with pytest.raises(helmlite.TemplateError, match=message):
        helmlite.render_template(template, SCOPE)


def test_values_merge_as_helm_coalesces_them() -> None:
    base = {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": "keep"}
    assert helmlite.merge_values(base, {"a": {"y": 3}, "b": [9], "c": None}) == {
        "a": {"x": 1, "y": 3},
        "b": [9],
    }


def test_a_release_name_helm_would_refuse_is_refused() -> None:
    with pytest.raises(helmlite.TemplateError, match="release name"):
        helmlite.render_chart(chart.CHART, release="GPUbot", namespace="x", values=chart.TOKENS)


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed (not on PyPI or in Debian)")
@pytest.mark.parametrize("render", sorted(chart.RENDERS))
def test_helm_renders_the_same_objects(render: str, tmp_path: Path) -> None:
    values, release, namespace = (
        (chart.CUSTOM, "ml-gpubot", "gpubot-system") if render == "custom" else ({}, "gpubot", "gpubot")
    )
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(helmlite.merge_values(chart.TOKENS, values)), encoding="utf-8")
    output = subprocess.run(
        ["helm", "template", release, str(chart.CHART), "--namespace", namespace, "-f", str(values_file)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    by_helm = [doc for doc in yaml.safe_load_all(output) if doc]

    assert sorted(map(comparable, by_helm), key=str) == sorted(
        map(comparable, chart.RENDERS[render]()), key=str
    )


def comparable(obj: chart.Obj) -> chart.Obj:
    """The object with toYaml's text (which go-yaml and PyYAML quote and indent differently) parsed back."""
    copy = yaml.safe_load(yaml.safe_dump(obj))
    if copy["kind"] == "ConfigMap":
        copy["data"] = {key: yaml.safe_load(text) for key, text in copy["data"].items()}
    if copy["kind"] == "Deployment":
        copy["spec"]["template"]["metadata"]["annotations"].pop("checksum/profiles")
    return dict(copy)
