"""Request bodies as the apiserver reads them: JSON or YAML, two protobuf messages, DeleteOptions.

No answer may carry a Python exception's text: a body that does not parse is described in the words
Go's encoding/json uses, which is what a real apiserver quotes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml
from aiohttp import web

from sim.cluster import errors, protobuf

ACCEPTED_BODIES = ("application/json", "application/yaml")
"""What the sim decodes for an object body; a CRD's list in a real apiserver, which has no protobuf for it."""

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan", "nil")
"""metav1 DeletionPropagation values as ValidateDeleteOptions lists them (with "nil"), v1.32.4
staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go."""

ProtobufDecoder = Callable[[bytes], dict[str, Any]]


async def read(
    request: web.Request, *, optional: bool = False, from_protobuf: ProtobufDecoder | None = None
) -> Any:
    raw = await request.read()
    if request.content_type == protobuf.CONTENT_TYPE:
        if from_protobuf is None:
            raise errors.unsupported_media(ACCEPTED_BODIES)
        try:
            return from_protobuf(raw)
        except (protobuf.ProtobufError, UnicodeDecodeError):
            raise errors.bad_request("the body of the request could not be decoded as protobuf") from None
    if not raw.strip():
        if optional:
            return None
        raise errors.bad_request("the body of the request is empty")
    if "yaml" in request.content_type:
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise errors.bad_request(yaml_error(err)) from None
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise errors.bad_request("invalid character in JSON input: the body is not UTF-8") from None
    except json.JSONDecodeError as err:
        raise errors.bad_request(
            "couldn't get version/kind; json parse error: " + go_json_error(err)
        ) from None


def yaml_error(err: yaml.YAMLError) -> str:
    """sigs.k8s.io/yaml reports `error converting YAML to JSON: yaml: line N: <problem>`."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or "could not parse"
    line = f"line {mark.line + 1}: " if mark is not None else ""
    return f"error converting YAML to JSON: yaml: {line}{problem}"


def _go_char(char: str) -> str:
    """encoding/json quoteChar."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    if char.isprintable():
        return f"'{char}'"
    return json.dumps(char)


def _open_container(text: str, pos: int) -> str:
    """The innermost `{` or `[` still open at `pos`, ignoring brackets inside strings."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text[:pos]:
        if in_string:
            in_string = not (char == '"' and not escaped)
            escaped = char == "\\" and not escaped
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def go_json_error(err: json.JSONDecodeError) -> str:
    """The SyntaxError text Go's encoding/json gives for the same input."""
    text, pos = err.doc, err.pos
    if pos >= len(text.rstrip()) or err.msg.startswith("Unterminated"):
        return "unexpected end of JSON input"
    char = _go_char(text[pos])
    if err.msg.startswith("Expecting property name"):
        return f"invalid character {char} looking for beginning of object key string"
    if err.msg.startswith("Expecting ':'"):
        return f"invalid character {char} after object key"
    if err.msg.startswith("Expecting ','"):
        inside = "object key:value pair" if _open_container(text, pos) == "{" else "array element"
        return f"invalid character {char} after {inside}"
    if err.msg.startswith("Extra data"):
        return f"invalid character {char} after top-level value"
    if text[pos] in LITERALS:
        return _literal_error(text, pos)
    return f"invalid character {char} looking for beginning of value"


LITERALS = {"t": "true", "f": "false", "n": "null"}


def _literal_error(text: str, pos: int) -> str:
    """encoding/json's scanner on a misspelt true, false or null."""
    literal = LITERALS[text[pos]]
    for offset, wanted in enumerate(literal):
        if pos + offset >= len(text):
            return "unexpected end of JSON input"
        if text[pos + offset] != wanted:
            return (
                f"invalid character {_go_char(text[pos + offset])} in literal {literal} "
                f"(expecting {_go_char(wanted)})"
            )
    return f"invalid character {_go_char(text[pos])} looking for beginning of value"


def query_int(value: Any) -> int:
    """A query parameter as the parameter codec converts it (strconv.ParseInt, base 10), refused with
    NewBadRequest(err.Error()) as the list, watch and delete handlers do."""
    text = str(value)
    try:
        if text.strip() != text or "_" in text:
            raise ValueError(text)
        return int(text, 10)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def delete_options(request: web.Request, body: Any) -> dict[str, Any]:
    """DeleteOptions from the body and the query (the query wins, as the handler decodes it last),
    checked as ValidateDeleteOptions does."""
    options = dict(body) if isinstance(body, dict) else {}
    query = request.query
    if "gracePeriodSeconds" in query:
        options["gracePeriodSeconds"] = query["gracePeriodSeconds"]
    if "propagationPolicy" in query:
        options["propagationPolicy"] = query["propagationPolicy"]
    if "orphanDependents" in query:
        options["orphanDependents"] = query["orphanDependents"] == "true"
    validate_delete_options(options)
    grace = options.get("gracePeriodSeconds")
    if grace is not None:
        options["gracePeriodSeconds"] = query_int(grace)
    return options


def validate_delete_options(options: dict[str, Any]) -> None:
    """ValidateDeleteOptions (v1.32.4), answered as NewInvalid(DeleteOptions.meta.k8s.io, "")."""
    causes: list[errors.Cause] = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        causes.append(
            errors.invalid_value(
                "propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be both set"
            )
        )
    if policy is not None and policy not in PROPAGATION_POLICIES[:3]:
        causes.append(errors.not_supported("propagationPolicy", policy, list(PROPAGATION_POLICIES)))
    if causes:
        raise errors.invalid("DeleteOptions.meta.k8s.io", "", causes)
