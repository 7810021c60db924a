"""The values and functions of Helm templates as Go and Sprig define them, for tests/deploy/helmlite.py."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import yaml


class TemplateError(ValueError):
    """The template or the values cannot be rendered; the message names the file and line."""


# -- values as Go sees them --------------------------------------------------------------------------------


def is_true(value: Any) -> bool:
    """Go's truth for `if`: false, 0, nil and empty strings, lists and maps are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float | str | list | dict | tuple):
        return bool(value)
    return True


def go_string(value: Any) -> str:
    """How Go prints a value read from YAML: numbers are float64, so `4.0` prints as `4`."""
    if value is None:
        return ""  # helm replaces "<no value>" with nothing
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    raise TemplateError(f"cannot print a {type(value).__name__} ({value!r}); use toYaml")


# -- functions (Sprig and Helm) ----------------------------------------------------------------------------


def _default(fallback: Any, *given: Any) -> Any:
    value = given[0] if given else None
    return value if is_true(value) else fallback


def _quote(*values: Any) -> str:
    return " ".join(json.dumps(go_string(v), ensure_ascii=False) for v in values if v is not None)


def _required(message: str, value: Any = None) -> Any:
    if value is None or value == "":
        raise TemplateError(message)
    return value


def _to_yaml(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=True, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("...").removesuffix("\n")


def _indent(spaces: int, text: str) -> str:
    pad = " " * spaces
    return pad + text.replace("\n", "\n" + pad)


def _nindent(spaces: int, text: str) -> str:
    return "\n" + _indent(spaces, text)


def _printf(template: str, *args: Any) -> str:
    remaining = list(args)

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if not remaining:
            raise TemplateError(f"printf {template!r}: too few arguments")
        return go_string(remaining.pop(0))

    text = re.sub(r"%[sdv%]", substitute, template)
    if remaining:
        raise TemplateError(f"printf {template!r}: too many arguments")
    return text


def _join(separator: str, items: Sequence[Any]) -> str:
    if not isinstance(items, list | tuple):
        raise TemplateError(f"join expects a list, not {items!r}")
    return separator.join(go_string(item) for item in items if item is not None)


def _equal(first: Any, *others: Any) -> bool:
    return any(first == other for other in others)


def _sha256sum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "default": _default,
    "quote": _quote,
    "required": _required,
    "toYaml": _to_yaml,
    "indent": _indent,
    "nindent": _nindent,
    "printf": _printf,
    "join": _join,
    "eq": _equal,
    "not": lambda value: not is_true(value),
    "sha256sum": _sha256sum,
}
