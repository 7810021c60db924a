"""Label and field selectors, parsed, validated and matched as apimachinery's labels and fields packages."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector the apiserver would refuse; the message is the body of its 400 BadRequest."""


# -- k8s.io/apimachinery/pkg/util/validation ---------------------------------------------------------
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_MAX_LENGTH = 63
_SUBDOMAIN_MAX_LENGTH = 253
_INT64_RE = re.compile(r"[+-]?[0-9]+")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, double spaces and all: `(e.g. 'MyName',  or 'my.name', regex used ...)`."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: an optional DNS-1123 subdomain prefix and '/', then a name of <= 63."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        errors = _prefix_errors(prefix)
    else:
        detail = _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        suffix = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        return [f"a qualified name {detail} {suffix}"]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _LABEL_MAX_LENGTH:
        errors.append(f"name part must be no more than {_LABEL_MAX_LENGTH} characters")
    if name and not _QUALIFIED_NAME_RE.fullmatch(name):
        detail = _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        errors.append(f"name part {detail}")
    return errors


def _prefix_errors(prefix: str) -> list[str]:
    if not prefix:
        return ["prefix part must be non-empty"]
    errors = []
    if len(prefix) > _SUBDOMAIN_MAX_LENGTH:
        errors.append(f"prefix part must be no more than {_SUBDOMAIN_MAX_LENGTH} characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
        errors.append(
            "prefix part " + _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue: empty, or up to 63 alphanumerics with '-', '_', '.' inside."""
    errors = []
    if len(value) > _LABEL_MAX_LENGTH:
        errors.append(f"must be no more than {_LABEL_MAX_LENGTH} characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def _go_value(value: Any) -> str:
    """How field.Error prints a bad value: strings as %q, everything else as JSON."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"))


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message bare, several deduplicated inside `[a, b]`."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# -- k8s.io/apimachinery/pkg/labels ------------------------------------------------------------------
IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
GREATER_THAN, LESS_THAN, EXISTS, DOES_NOT_EXIST = "gt", "lt", "exists", "!"
_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)


@dataclass(frozen=True)
class Requirement:
    """One `key op values` term; `values` is sorted and deduplicated, as sets.String.List() returns it."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        return present and _compare_integers(labels[self.key], self.operator, self.values)

    def __str__(self) -> str:
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return ("!" if self.operator == DOES_NOT_EXIST else "") + self.key
        joined = ",".join(self.values)
        if self.operator in (IN, NOT_IN):
            return f"{self.key} {self.operator} ({joined})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{joined}"


def _compare_integers(actual: str, operator: str, values: tuple[str, ...]) -> bool:
    """Gt/Lt compare as int64; a label that is not an integer never matches."""
    if len(values) != 1 or not _INT64_RE.fullmatch(actual):
        return False
    have, want = int(actual), int(values[0])
    return have > want if operator == GREATER_THAN else have < want


@dataclass(frozen=True)
class LabelSelector:
    """All requirements must hold; none selects everything. `selects_nothing` is labels.Nothing()."""

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.selects_nothing:
            return False
        have = labels or {}
        return all(req.matches(have) for req in self.requirements)

    def empty(self) -> bool:
        return not self.requirements and not self.selects_nothing

    def __str__(self) -> str:
        return ",".join(str(req) for req in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(selects_nothing=True)


def new_requirement(key: str, operator: str, values: Iterable[str], *, path: str = "") -> Requirement:
    """labels.NewRequirement: validate the key, the operator's arity and every value."""
    vals = list(values)
    prefix = f"{path}." if path else ""
    errors = []
    if key_errors := qualified_name_errors(key):
        errors.append(_invalid(f"{prefix}key", key, "; ".join(key_errors)))
    errors += _arity_errors(operator, vals, f"{prefix}values")
    for index, value in enumerate(vals):
        if errs := label_value_errors(value):
            errors.append(_invalid(f"{prefix}values[{index}][{key}]", value, "; ".join(errs)))
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, operator, tuple(sorted(set(vals))))


def _arity_errors(operator: str, values: list[str], path: str) -> list[str]:
    if operator in (IN, NOT_IN) and not values:
        return [_invalid(path, values, "for 'in', 'notin' operators, values set can't be empty")]
    if operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS) and len(values) != 1:
        return [_invalid(path, values, "exact-match compatibility requires one single value")]
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        return [_invalid(path, values, "values set must be empty for exists and does not exist")]
    if operator in (GREATER_THAN, LESS_THAN):
        errors = []
        if len(values) != 1:
            errors.append(_invalid(path, values, "for 'Gt', 'Lt' operators, exactly one value is required"))
        for index, value in enumerate(values):
            if not _INT64_RE.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                errors.append(_invalid(f"{path}[{index}]", value, detail))
        return errors
    if operator not in (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST):
        allowed = ", ".join(f'"{op}"' for op in (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST))
        return [f"operator: Unsupported value: {_go_value(operator)}: supported values: {allowed}"]
    return []


class _Token(enum.Enum):
    ERROR = "error"
    END = "end"
    CLOSE_PAR = ")"
    COMMA = ","
    NOT = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER_THAN = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS_THAN = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAR = "("


_LITERAL_TOKENS = {t.value: t for t in _Token if t not in (_Token.ERROR, _Token.END, _Token.IDENTIFIER)}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATOR_TOKENS = {
    _Token.IN: IN,
    _Token.NOT_IN: NOT_IN,
    _Token.EQUALS: EQUALS,
    _Token.DOUBLE_EQUALS: DOUBLE_EQUALS,
    _Token.NOT_EQUALS: NOT_EQUALS,
    _Token.GREATER_THAN: GREATER_THAN,
    _Token.LESS_THAN: LESS_THAN,
}

_Item = tuple[_Token, str]


def _lex(text: str) -> list[_Item]:
    """The labels Lexer: identifiers run until whitespace or a special symbol; operators are longest-match."""
    items: list[_Item] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            items.append((_Token.END, ""))
            return items
        item, pos = _lex_special(text, pos) if text[pos] in _SPECIAL else _lex_identifier(text, pos)
        items.append(item)


def _lex_identifier(text: str, pos: int) -> tuple[_Item, int]:
    end = pos
    while end < len(text) and text[end] not in _SPECIAL and text[end] not in _WHITESPACE:
        end += 1
    word = text[pos:end]
    return (_LITERAL_TOKENS.get(word, _Token.IDENTIFIER), word), end


def _lex_special(text: str, pos: int) -> tuple[_Item, int]:
    best: _Item | None = None
    end = pos
    while end < len(text) and text[end] in _SPECIAL:
        candidate = text[pos : end + 1]
        if candidate in _LITERAL_TOKENS:
            best = (_LITERAL_TOKENS[candidate], candidate)
        elif best is not None:
            break
        end += 1
    if best is None:
        return (_Token.ERROR, f"error expected: keyword found '{text[pos:end]}'"), end
    return best, pos + len(best[1])


class _Parser:
    """labels.Parser: recursive descent over the scanned items; `in`/`notin` are plain words as values."""

    def __init__(self, items: list[_Item]) -> None:
        self.items = items
        self.position = 0

    def peek(self, as_value: bool = True) -> _Item:
        return _as_value(self.items[self.position], as_value)

    def take(self, as_value: bool = True) -> _Item:
        self.position += 1
        return _as_value(self.items[self.position - 1], as_value)

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.peek()
            if token == _Token.END:
                return requirements
            if token not in (_Token.IDENTIFIER, _Token.NOT):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            token, literal = self.take()
            if token == _Token.END:
                return requirements
            if token != _Token.COMMA:
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            after, after_literal = self.peek()
            if after not in (_Token.IDENTIFIER, _Token.NOT):
                raise SelectorError(f"found '{after_literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        key, operator = self.key_and_inferred_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return new_requirement(key, operator, [])
        token, literal = self.take(as_value=False)
        if token not in _OPERATOR_TOKENS:
            raise SelectorError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        operator = _OPERATOR_TOKENS[token]
        values = self.value_set() if operator in (IN, NOT_IN) else self.exact_value()
        return new_requirement(key, operator, values)

    def key_and_inferred_operator(self) -> tuple[str, str]:
        token, literal = self.take()
        negated = token == _Token.NOT
        if negated:
            token, literal = self.take()
        if token != _Token.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        if errors := qualified_name_errors(literal):
            # The parser validates with a nil field.Path, which Go prints as "<nil>".
            raise SelectorError(_invalid("<nil>", literal, "; ".join(errors)))
        if negated:
            return literal, DOES_NOT_EXIST
        at_end = self.peek()[0] in (_Token.END, _Token.COMMA)
        return literal, EXISTS if at_end else ""

    def value_set(self) -> list[str]:
        token, literal = self.take()
        if token != _Token.OPEN_PAR:
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self.peek()
        if token == _Token.CLOSE_PAR:
            self.take()
            return [""]
        if token not in (_Token.IDENTIFIER, _Token.COMMA):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifier_list()
        if self.take()[0] != _Token.CLOSE_PAR:
            raise SelectorError(f"found '{literal}', expected: ')'")
        return values

    def identifier_list(self) -> list[str]:
        """`(a,b)`, `(,a)`, `(a,)` and `(a,,b)`: an empty slot is the empty-string value."""
        values: list[str] = []
        while True:
            token, literal = self.take()
            if token == _Token.IDENTIFIER:
                values.append(literal)
                following, following_literal = self.peek()
                if following == _Token.CLOSE_PAR:
                    return values
                if following != _Token.COMMA:
                    raise SelectorError(f"found '{following_literal}', expected: ',' or ')'")
            elif token == _Token.COMMA:
                if not values:
                    values.append("")
                following = self.peek()[0]
                if following == _Token.CLOSE_PAR:
                    values.append("")
                    return values
                if following == _Token.COMMA:
                    self.take()
                    values.append("")
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        if self.peek()[0] in (_Token.END, _Token.COMMA):
            return [""]
        token, literal = self.take()
        if token != _Token.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return [literal]


def _as_value(item: _Item, as_value: bool) -> _Item:
    """In value position the keywords `in` and `notin` are plain identifiers (`x in (in)`)."""
    if as_value and item[0] in (_Token.IN, _Token.NOT_IN):
        return _Token.IDENTIFIER, item[1]
    return item


def parse_label_selector(text: str) -> LabelSelector:
    """labels.Parse: `a=b,c!=d,e in (f,g),h notin (i),j,!k`; the empty string selects everything."""
    requirements = _Parser(_lex(text)).parse()
    return LabelSelector(tuple(sorted(requirements, key=lambda req: req.key)))


_DICT_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: None selects nothing, `{}` selects everything."""
    if selector is None:
        return NOTHING
    match_labels: Mapping[str, str] = selector.get("matchLabels") or {}
    expressions: list[Mapping[str, Any]] = selector.get("matchExpressions") or []
    requirements = [new_requirement(key, EQUALS, [value]) for key, value in match_labels.items()]
    for expression in expressions:
        operator = expression.get("operator", "")
        if operator not in _DICT_OPERATORS:
            raise SelectorError(f"{_go_value(operator)} is not a valid label selector operator")
        values = expression.get("values") or []
        requirements.append(new_requirement(expression.get("key", ""), _DICT_OPERATORS[operator], values))
    return LabelSelector(tuple(sorted(requirements, key=lambda req: req.key)))


# -- k8s.io/apimachinery/pkg/fields ------------------------------------------------------------------
@dataclass(frozen=True)
class FieldRequirement:
    """`field=value` or `field!=value`; `==` is kept as written but means `=`."""

    field: str
    operator: str
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        equal = field_value(obj, self.field) == self.value
        return not equal if self.operator == NOT_EQUALS else equal

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.operator == NOT_EQUALS else '='}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """All terms must hold; no terms selects everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(req.matches(obj) for req in self.requirements)

    def fields(self) -> list[str]:
        return list(dict.fromkeys(req.field for req in self.requirements))

    def empty(self) -> bool:
        return not self.requirements

    def requires_exact_match(self, name: str) -> str | None:
        """The value `name` must equal, if the selector pins it (lets a server narrow a list by name)."""
        for req in self.requirements:
            if req.field == name and req.operator != NOT_EQUALS:
                return req.value
        return None

    def __str__(self) -> str:
        return ",".join(str(req) for req in self.requirements)


def escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash first, then `,` and `=`."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    """fields.UnescapeValue; its errors are returned bare by the apiserver, without the selector."""
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char in ",=":
            # Go formats the rune with %v, so the message carries its code point.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(char)}")
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, None)
        if escaped is None:
            raise SelectorError("invalid field selector: invalid escape sequence: \\")
        if escaped not in "\\,=":
            raise SelectorError(f"invalid field selector: invalid escape sequence: \\{escaped}")
        out.append(escaped)
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not backslash-escaped, keeping the escapes for the unescape step."""
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """The first `!=`, `==` or `=` splits a term; the field name itself has no escapes."""
    for index in range(len(term)):
        for operator in (NOT_EQUALS, DOUBLE_EQUALS, EQUALS):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """fields.ParseSelector: `a.b=v,c!=w`, values escaped with fields.EscapeValue; "" selects everything."""
    requirements = []
    for term in sorted(_split_terms(text)) if text else []:
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        name, operator, raw_value = split
        requirements.append(FieldRequirement(name, operator, _unescape_field_value(raw_value)))
    return FieldSelector(tuple(requirements))


def _event_source(obj: Mapping[str, Any]) -> str:
    """registry/core/event: `source` is source.component, falling back to reportingComponent."""
    source = obj.get("source")
    component = source.get("component") if isinstance(source, Mapping) else None
    return str(component or obj.get("reportingComponent") or "")


# Fields whose selectable value is computed, not read from a path of the same name.
_COMPUTED_FIELDS: dict[str, Callable[[Mapping[str, Any]], str]] = {"source": _event_source}
# Typed Go bools print "false" when unset, so `spec.unschedulable=false` matches a node without the field.
_BOOLEAN_FIELDS = frozenset({"spec.hostNetwork", "spec.unschedulable"})


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares: missing → "", booleans → "true"/"false", scalars → str()."""
    if path in _COMPUTED_FIELDS:
        return _COMPUTED_FIELDS[path](obj)
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    if isinstance(current, bool):
        return "true" if current else "false"
    if current is None:
        return "false" if path in _BOOLEAN_FIELDS else ""
    if isinstance(current, (Mapping, list)):
        return ""
    return str(current)


_OBJECT_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
DEFAULT_FIELDS = _OBJECT_META_FIELDS
SUPPORTED_FIELDS: dict[str, frozenset[str]] = {
    "pods": _OBJECT_META_FIELDS
    | {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "nodes": frozenset({"metadata.name", "spec.unschedulable"}),
    "events": _OBJECT_META_FIELDS
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "namespaces": frozenset({"metadata.name", "status.phase"}),
}

# pkg/apis/events/v1 AddFieldLabelConversionsForEvent: events.k8s.io names → the core/v1 selectable fields.
EVENTS_V1_FIELDS: dict[str, str] = {
    "metadata.name": "metadata.name",
    "metadata.namespace": "metadata.namespace",
    "reason": "reason",
    "type": "type",
    "reportingController": "reportingComponent",
    **{f"regarding.{leaf}": f"involvedObject.{leaf}" for leaf in ("kind", "namespace", "name", "uid")},
    **{
        f"regarding.{leaf}": f"involvedObject.{leaf}"
        for leaf in ("apiVersion", "resourceVersion", "fieldPath")
    },
}


def check_supported(plural: str, selector: FieldSelector) -> None:
    """The field label conversion every list/watch runs: an unknown field is a 400 from a real apiserver."""
    supported = SUPPORTED_FIELDS.get(plural, DEFAULT_FIELDS)
    for req in selector.requirements:
        if req.field not in supported:
            raise SelectorError(f"field label not supported: {req.field}")


def events_v1_to_core(selector: FieldSelector) -> FieldSelector:
    """Rewrite an events.k8s.io/v1 selector (`regarding.name=x`) into core/v1 names, rejecting others."""
    converted = []
    for req in selector.requirements:
        if req.field not in EVENTS_V1_FIELDS:
            raise SelectorError(f"field label not supported: {req.field}")
        converted.append(FieldRequirement(EVENTS_V1_FIELDS[req.field], req.operator, req.value))
    return FieldSelector(tuple(converted))
