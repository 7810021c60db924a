"""A small JSON validator that words its findings as Slack's Block Kit validator does.

Slack answers an invalid payload with one line per finding, `<message> [json-pointer:<path>]`, and lists
every finding, not only the first. The wordings used here are copied from real Slack answers quoted in
public reports; `blockkit` cites them beside the specs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

Problem = tuple[str, str]
"""(message, JSON pointer), e.g. ("must be less than 3001 characters", "/blocks/0/text/text")."""

UNION = "failed to match all allowed schemas"
"""Slack's line for a value that may take several shapes (a text object: plain_text or mrkdwn) and fits
none; it comes before the finding in the shape that was meant (stoiveyp/Slack.NetStandard#60,
mozilla-iam/sso-dashboard-configuration#718)."""


class Rule(Protocol):
    def check(self, value: Any, at: str, out: list[Problem]) -> None: ...


def check_length(length: int, at: str, out: list[Problem], *, low: int = 0, high: int = 0) -> None:
    """Slack states a maximum N as "less than N+1" and a minimum 1 as "more than 0"."""
    if high and length > high:
        out.append((f"must be less than {high + 1} characters", at))
    elif length < low:
        out.append((f"must be more than {low - 1} characters", at))


def pointer(at: str, key: str | int) -> str:
    """RFC 6901: `~` and `/` inside a key are escaped."""
    return f"{at}/{str(key).replace('~', '~0').replace('/', '~1')}"


@dataclass(frozen=True)
class Anything:
    """A field Slack knows whose value the emulator does not check (booleans, numbers, nested objects
    it does not model): known, so it is no "invalid additional property"."""

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        return None


ANY = Anything()


@dataclass(frozen=True)
class Str:
    max: int = 0
    min: int = 0

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        if not isinstance(value, str):
            out.append(("must provide a string", at))
            return
        check_length(len(value), at, out, low=self.min, high=self.max)


@dataclass(frozen=True)
class Enum:
    values: tuple[str, ...]

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        if value not in self.values:
            out.append(("must be a valid enum value", at))


Extra = Callable[[dict[str, Any], str, list[Problem]], None]
"""A rule across fields of one object (a section needs `text` or `fields`)."""


@dataclass(frozen=True)
class Spec:
    """One object shape: its known fields, which of them are required, and any rule across fields."""

    fields: Mapping[str, Rule]
    required: tuple[str, ...] = ()
    extra: Extra | None = None
    open: bool = False
    """Not modelled in full: unknown properties pass rather than be refused on the emulator's guess."""

    def check_fields(self, value: dict[str, Any], at: str, out: list[Problem]) -> None:
        for name in self.required:
            if name not in value:
                out.append((f"missing required field: {name}", at))
        for name, item in value.items():
            rule = self.fields.get(name)
            if rule is not None:
                rule.check(item, pointer(at, name), out)
            elif not self.open:
                out.append((f"invalid additional property: {name}", at))
        if self.extra is not None:
            self.extra(value, at, out)


@dataclass(frozen=True)
class Obj:
    spec: Spec

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        if not isinstance(value, dict):
            out.append(("must provide an object", at))
            return
        self.spec.check_fields(value, at, out)


@dataclass(frozen=True)
class Arr:
    item: Rule
    max: int = 0
    min: int = 0

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        if not isinstance(value, list):
            out.append(("must provide an array", at))
            return
        if self.max and len(value) > self.max:
            out.append((f"no more than {self.max} items allowed", at))
        elif len(value) < self.min:
            out.append((f"must provide at least {self.min} items", at))
        for index, item in enumerate(value):
            self.item.check(item, pointer(at, index), out)


@dataclass(frozen=True)
class Typed:
    """A union told apart by `type` (blocks, elements): a type it does not allow is "unsupported"."""

    kinds: Mapping[str, Spec]

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        if not isinstance(value, dict):
            out.append(("must provide an object", at))
            return
        kind = value.get("type")
        if kind is None:
            out.append(("missing required field: type", at))
        elif not isinstance(kind, str) or kind not in self.kinds:
            out.append((f"unsupported type: {kind}", pointer(at, "type")))
        else:
            self.kinds[kind].check_fields(value, at, out)


PLAIN = Spec({"type": ANY, "text": Str(), "emoji": ANY}, required=("type", "text"))
MRKDWN = Spec({"type": ANY, "text": Str(), "verbatim": ANY}, required=("type", "text"))
"""docs.slack.dev/reference/block-kit/composition-objects/text-object: `emoji` is for plain_text only,
`verbatim` for mrkdwn only; Slack refuses an emoji on mrkdwn with "invalid additional property: emoji"
(grafana/oncall#702)."""
TEXT_KINDS = {"plain_text": PLAIN, "mrkdwn": MRKDWN}


@dataclass(frozen=True)
class Text:
    """A text object of at most `max` characters (at least one); `mrkdwn` says whether the field takes
    mrkdwn as well as plain_text, which makes it a union with Slack's extra line on failure."""

    max: int
    mrkdwn: bool = False

    def check(self, value: Any, at: str, out: list[Problem]) -> None:
        if not isinstance(value, dict):
            out.append(("must provide an object", at))
            return
        found: list[Problem] = []
        kind = value.get("type")
        allowed = ("plain_text", "mrkdwn") if self.mrkdwn else ("plain_text",)
        if kind is None:
            found.append(("missing required field: type", at))
        elif kind not in allowed:
            # A header in mrkdwn: worded as Slack's answer for a value outside an enum (agents.sessions
            # status, quoted in several public reports); the exact line for this field was not found.
            found.append(("must be a valid enum value", pointer(at, "type")))
        else:
            TEXT_KINDS[str(kind)].check_fields(value, at, found)
            if isinstance(value.get("text"), str):
                check_length(len(value["text"]), pointer(at, "text"), found, low=1, high=self.max)
        if found and self.mrkdwn:
            out.append((UNION, at))
        out.extend(found)


def format_problems(problems: list[Problem]) -> list[str]:
    """The `errors` lines of an `invalid_blocks` answer."""
    return [f"{message} [json-pointer:{where}]" for message, where in problems]
