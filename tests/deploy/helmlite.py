"""Renders the part of Helm's template language gpubot's chart uses, for tests on machines without helm.

helm is packaged neither on PyPI nor in Debian, so the chart tests render with this instead. It follows Go
text/template and Helm where the chart relies on them: `{{-` / `-}}` trimming, pipelines that pass a value
as the last argument of the next function, parenthesised sub-pipelines, Go's truthiness for `if`, Helm's
values merging and its Release and Chart objects, and the functions in sprig.py. Anything else (range,
with, variables, define/include, comments, a key missing from the values) raises TemplateError, so a
template that outgrows the renderer fails loudly instead of rendering wrong. It is stricter than helm on
one point on purpose: helm prints nothing for a missing key, which hides typos in templates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.deploy import sprig
from tests.deploy.sprig import TemplateError as TemplateError

# -- parsing ---------------------------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{(-[ \t\r\n])?(.*?)([ \t\r\n]-)?\}\}", re.DOTALL)
_EXPRESSION_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\\n]|\\.)*")
      | (?P<number>-?[0-9]+(?:\.[0-9]+)?)
      | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<punct>[|()])
    )""",
    re.VERBOSE,
)
_GO_SPACE = " \t\r\n"
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "nil": None}


@dataclass(frozen=True)
class Operand:
    kind: str
    """`literal`, `field`, `function` or `pipeline`."""
    value: Any


Command = tuple[Operand, ...]
Pipeline = tuple[Command, ...]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Action:
    pipeline: Pipeline
    where: str


@dataclass
class Conditional:
    condition: Pipeline
    where: str
    then: list[Node] = field(default_factory=list)
    otherwise: list[Node] | None = None


Node = Text | Action | Conditional


def parse_expression(source: str, where: str) -> Pipeline:
    """`.Values.x | default (printf "%s-y" .Release.Name) | quote` → commands of operands."""
    tokens: list[tuple[str, str]] = []
    position = 0
    source = source.rstrip()
    while position < len(source):
        match = _EXPRESSION_TOKEN.match(source, position)
        if match is None or match.end() == position:
            raise TemplateError(f"{where}: cannot read {source[position:].strip()!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    pipeline, rest = _parse_pipeline(tokens, where)
    if rest:
        raise TemplateError(f"{where}: unexpected {rest[0][1]!r}")
    return pipeline


def _parse_pipeline(tokens: list[tuple[str, str]], where: str) -> tuple[Pipeline, list[tuple[str, str]]]:
    commands: list[Command] = []
    operands: list[Operand] = []
    while tokens and tokens[0] != ("punct", ")"):
        kind, text = tokens.pop(0)
        if (kind, text) == ("punct", "|"):
            if not operands:
                raise TemplateError(f"{where}: a pipe with nothing before it")
            commands.append(tuple(operands))
            operands = []
        elif (kind, text) == ("punct", "("):
            inner, tokens = _parse_pipeline(tokens, where)
            if not tokens:
                raise TemplateError(f"{where}: unclosed (")
            tokens.pop(0)
            operands.append(Operand("pipeline", inner))
        else:
            operands.append(_operand(kind, text, where))
    if not operands:
        raise TemplateError(f"{where}: empty command")
    commands.append(tuple(operands))
    return tuple(commands), tokens


def _operand(kind: str, text: str, where: str) -> Operand:
    if kind == "string":
        return Operand("literal", json.loads(text))
    if kind == "number":
        return Operand("literal", float(text) if "." in text else int(text))
    if kind == "field":
        return Operand("field", tuple(text.split(".")[1:]))
    if text in _CONSTANTS:
        return Operand("literal", _CONSTANTS[text])
    if text not in sprig.FUNCTIONS:
        raise TemplateError(f"{where}: {text!r} is not a function this renderer knows")
    return Operand("function", text)


def _tokens(source: str, name: str) -> list[tuple[str, str, str]]:
    """(`text`|`action`, content, where) with Go's trim markers applied to the neighbouring text."""
    out: list[tuple[str, str, str]] = []
    position, trim_next = 0, False
    for match in _ACTION.finditer(source):
        text = source[position : match.start()]
        if trim_next:
            text = text.lstrip(_GO_SPACE)
        if match.group(1):
            text = text.rstrip(_GO_SPACE)
        out.append(("text", text, ""))
        where = f"{name}:{source.count(chr(10), 0, match.start()) + 1}"
        out.append(("action", match.group(2).strip(), where))
        position, trim_next = match.end(), bool(match.group(3))
    tail = source[position:]
    out.append(("text", tail.lstrip(_GO_SPACE) if trim_next else tail, ""))
    return out


def _innermost(root: list[Node], open_blocks: list[Conditional]) -> list[Node]:
    """Where the next node goes: the open `if`'s current branch, or the top level."""
    if not open_blocks:
        return root
    block = open_blocks[-1]
    return block.then if block.otherwise is None else block.otherwise


def parse_template(source: str, name: str) -> list[Node]:
    """The template's nodes, with `if … else … end` nested."""
    root: list[Node] = []
    open_blocks: list[Conditional] = []
    for kind, content, where in _tokens(source, name):
        keyword, _, rest = content.partition(" ")
        if kind == "text":
            _innermost(root, open_blocks).append(Text(content))
        elif keyword == "if":
            block = Conditional(parse_expression(rest, where), where)
            _innermost(root, open_blocks).append(block)
            open_blocks.append(block)
        elif content == "else":
            if not open_blocks or open_blocks[-1].otherwise is not None:
                raise TemplateError(f"{where}: else without if")
            open_blocks[-1].otherwise = []
        elif content == "end":
            if not open_blocks:
                raise TemplateError(f"{where}: end without if")
            open_blocks.pop()
        elif keyword in ("range", "with", "define", "template", "block", "include") or content.startswith(
            ("/*", "$")
        ):
            raise TemplateError(f"{where}: {keyword!r} is not supported by this renderer")
        else:
            _innermost(root, open_blocks).append(Action(parse_expression(content, where), where))
    if open_blocks:
        raise TemplateError(f"{open_blocks[-1].where}: if without end")
    return root


# -- evaluation -----------------------------------------------------------------------------------------

_NOTHING_PIPED = object()


def _look_up(path: tuple[str, ...], scope: Mapping[str, Any], where: str) -> Any:
    value: Any = scope
    for depth, key in enumerate(path):
        shown = "." + ".".join(path[: depth + 1])
        if not isinstance(value, Mapping):
            raise TemplateError(f"{where}: {shown}: {'.' + '.'.join(path[:depth])} is not a map")
        if key not in value:
            raise TemplateError(f"{where}: {shown} is not set (add it to values.yaml)")
        value = value[key]
    return value


def _evaluate(operand: Operand, scope: Mapping[str, Any], where: str) -> Any:
    if operand.kind == "literal":
        return operand.value
    if operand.kind == "field":
        return _look_up(operand.value, scope, where)
    if operand.kind == "pipeline":
        return run_pipeline(operand.value, scope, where)
    raise TemplateError(f"{where}: function {operand.value!r} used as a value; wrap it in ( )")


def _run_command(command: Command, scope: Mapping[str, Any], where: str, piped: Any) -> Any:
    head, *rest = command
    if head.kind != "function":
        if rest or piped is not _NOTHING_PIPED:
            raise TemplateError(f"{where}: only a function takes arguments")
        return _evaluate(head, scope, where)
    args = [_evaluate(operand, scope, where) for operand in rest]
    if piped is not _NOTHING_PIPED:
        args.append(piped)
    try:
        return sprig.FUNCTIONS[head.value](*args)
    except TemplateError as error:
        raise TemplateError(f"{where}: {error}") from error
    except (TypeError, AttributeError) as error:
        raise TemplateError(f"{where}: {head.value}: {error}") from error


def run_pipeline(pipeline: Pipeline, scope: Mapping[str, Any], where: str) -> Any:
    value: Any = _NOTHING_PIPED
    for command in pipeline:
        value = _run_command(command, scope, where, value)
    return value


def _render_nodes(nodes: Sequence[Node], scope: Mapping[str, Any], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Action):
            value = run_pipeline(node.pipeline, scope, node.where)
            try:
                out.append(sprig.go_string(value))
            except TemplateError as error:
                raise TemplateError(f"{node.where}: {error}") from error
        elif sprig.is_true(run_pipeline(node.condition, scope, node.where)):
            _render_nodes(node.then, scope, out)
        else:
            _render_nodes(node.otherwise or [], scope, out)


def render_template(source: str, scope: Mapping[str, Any], name: str = "template") -> str:
    out: list[str] = []
    _render_nodes(parse_template(source, name), scope, out)
    return "".join(out)


# -- charts -------------------------------------------------------------------------------------------------

_RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def merge_values(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing: maps merge key by key, anything else replaces, and null deletes a default."""
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class Rendered:
    files: dict[str, str]
    """Template path (`templates/x.yaml`) → rendered text, NOTES.txt included."""

    def manifests(self) -> list[dict[str, Any]]:
        """Every non-empty YAML document of the rendered manifests, in file order."""
        objects: list[dict[str, Any]] = []
        for path, text in sorted(self.files.items()):
            if not path.endswith((".yaml", ".yml")):
                continue
            for document in yaml.safe_load_all(text):
                if document is not None:
                    objects.append(document)
        return objects


def render_chart(
    chart: Path, *, release: str, namespace: str, values: Mapping[str, Any] | None = None
) -> Rendered:
    """What `helm template RELEASE CHART --namespace NS -f values` renders, for this renderer's subset."""
    if len(release) > 53 or not _RELEASE_NAME.fullmatch(release):
        raise TemplateError(f"release name {release!r}: lowercase letters, digits and '-', at most 53")
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))
    defaults = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8")) or {}
    scope = {
        "Values": merge_values(defaults, values or {}),
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True},
        "Chart": {key[:1].upper() + key[1:]: value for key, value in metadata.items()},
    }
    files: dict[str, str] = {}
    for path in sorted((chart / "templates").iterdir()):
        if path.name.startswith("_") or not path.is_file():
            continue
        name = f"templates/{path.name}"
        files[name] = render_template(path.read_text(encoding="utf-8"), scope, name)
    return Rendered(files)
