"""The sliver of PromQL the simulated Prometheus answers, parsed and evaluated as Prometheus 3 would.

Shapes: a selector with label matchers, the same with a range (`[30m]`, raw samples), and
`max_over_time` / `avg_over_time` over a range. Ranges are left-open, `(t - range, t]`, and a bare
selector looks back 5 minutes for its newest sample, unless a staleness marker ended the series.
Anything else is refused with the error text a client would log.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

LOOKBACK = 300.0
"""Prometheus --query.lookback-delta: how far back a bare selector finds a sample."""
MAX_POINTS = 11_000
"""Prometheus refuses range queries with more points per series than this."""
FUNCTIONS: dict[str, Callable[[list[float]], float]] = {
    "max_over_time": max,
    "avg_over_time": lambda values: sum(values) / len(values),
}
DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
DURATION_UNITS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
TOKEN = re.compile(
    r"""\s*(?:
      (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
    | (?P<op>=~|!~|!=|=)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    | (?P<range>\[[^\]]*\])
    | (?P<punct>[{}(),])
    )""",
    re.VERBOSE,
)


class QueryError(ValueError):
    """Bad input: the API answers it as `bad_data`."""


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (actual == self.value) == (self.op == "=")
        return bool(re.fullmatch(self.value, actual)) == (self.op == "=~")


@dataclass(frozen=True)
class Query:
    matchers: tuple[Matcher, ...]
    range: float | None = None
    """Seconds of a range selector, `[30m]`; None for a bare selector."""
    function: str | None = None

    def selects(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)


@dataclass(frozen=True)
class Series:
    """One time series on a regular scrape grid, in Unix seconds; samples are computed, not stored."""

    labels: Mapping[str, str]
    first: float
    last: float
    interval: float
    value_at: Callable[[float], float]
    stale_from: float | None = None
    """A staleness marker: bare selectors see nothing at or after this time."""

    def samples(self, after: float, upto: float) -> list[tuple[float, float]]:
        """Samples with `after < t <= upto`."""
        top = min(upto, self.last)
        k_min = max(0, math.floor((after - self.first) / self.interval) + 1)
        k_max = math.floor((top - self.first) / self.interval + 1e-9)
        times = (self.first + k * self.interval for k in range(k_min, k_max + 1))
        return [(t, self.value_at(t)) for t in times if t > after]


# -- parsing ---------------------------------------------------------------------------------
def parse_duration(text: str) -> float:
    match = DURATION.fullmatch(text)
    if not text or not match:
        raise QueryError(f'not a valid duration string: "{text}"')
    return sum(int(g) * unit for g, unit in zip(match.groups(), DURATION_UNITS, strict=True) if g)


def parse_time(text: str) -> float:
    """Unix seconds from `<rfc3339 | unix_timestamp>`, as the HTTP API accepts both."""
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise QueryError(f'cannot parse "{text}" to a valid timestamp')
        return seconds
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as err:
        raise QueryError(f'cannot parse "{text}" to a valid timestamp') from err
    if moment.tzinfo is None:
        raise QueryError(f'cannot parse "{text}" to a valid timestamp')
    return moment.timestamp()


def parse_step(text: str) -> float:
    try:
        step = float(text)
    except ValueError:
        try:
            step = parse_duration(text)
        except QueryError as err:
            raise QueryError(f'cannot parse "{text}" to a valid duration') from err
    if not math.isfinite(step) or step <= 0:
        raise QueryError(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
        )
    return step


def parse(text: str) -> Query:
    tokens = _tokenize(text)
    if not tokens:
        raise QueryError("1:1: parse error: no expression found in input")
    function = None
    if len(tokens) > 1 and tokens[0][0] == "name" and tokens[1] == ("punct", "("):
        function = tokens[0][1]
        if function not in FUNCTIONS:
            raise _unsupported(text)
        if tokens[-1] != ("punct", ")"):
            raise QueryError("parse error: unclosed left parenthesis")
        tokens = tokens[2:-1]
    matchers, rest = _selector(tokens, text)
    seconds = None
    if rest and rest[0][0] == "range":
        seconds = parse_duration(rest[0][1][1:-1].strip())
        rest = rest[1:]
    if rest:
        raise _unsupported(text)
    if function and seconds is None:
        raise QueryError(f'expected type range vector in call to function "{function}", got instant vector')
    if not any(_non_empty(m) for m in matchers):
        raise QueryError("vector selector must contain at least one non-empty matcher")
    return Query(tuple(matchers), seconds, function)


def _non_empty(matcher: Matcher) -> bool:
    if matcher.op == "=":
        return matcher.value != ""
    return matcher.op == "=~" and not re.fullmatch(matcher.value, "")


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text.rstrip()):
        match = TOKEN.match(text, position)
        if not match:
            raise QueryError(f"1:{position + 1}: parse error: unexpected character {text[position]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def _selector(tokens: list[tuple[str, str]], text: str) -> tuple[list[Matcher], list[tuple[str, str]]]:
    matchers: list[Matcher] = []
    if tokens and tokens[0][0] == "name":
        matchers.append(Matcher("__name__", "=", tokens[0][1]))
        tokens = tokens[1:]
    if not tokens or tokens[0] != ("punct", "{"):
        if not matchers:
            raise _unsupported(text)
        return matchers, tokens
    tokens = tokens[1:]
    while tokens and tokens[0] != ("punct", "}"):
        if len(tokens) < 3 or (tokens[0][0], tokens[1][0], tokens[2][0]) != ("name", "op", "string"):
            raise QueryError(f"parse error: unexpected label matcher in {text!r}")
        matchers.append(Matcher(tokens[0][1], tokens[1][1], _unquote(tokens[2][1])))
        if matchers[-1].op in ("=~", "!~"):
            _check_regex(matchers[-1].value)
        tokens = tokens[3:]
        if tokens and tokens[0] == ("punct", ","):
            tokens = tokens[1:]
    if not tokens:
        raise QueryError("parse error: unexpected end of input inside braces")
    return matchers, tokens[1:]


def _unquote(literal: str) -> str:
    body = literal[1:-1]
    if literal[0] == "`":
        return body
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _check_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as err:
        raise QueryError(f"error parsing regexp: {err}: `{pattern}`") from err


def _unsupported(text: str) -> QueryError:
    return QueryError(
        f"unsupported by the simulated Prometheus: {text!r}; it answers a selector, "
        "a selector with a range, and max_over_time or avg_over_time over a range"
    )


# -- evaluating ------------------------------------------------------------------------------
def instant(query: Query, series: Iterable[Series], at: float) -> dict[str, Any]:
    """The `data` of /api/v1/query."""
    chosen = [s for s in series if query.selects(s.labels)]
    if query.range is not None and query.function is None:
        result = []
        for s in chosen:
            samples = s.samples(at - query.range, at)
            if samples:
                result.append({"metric": dict(s.labels), "values": [_point(t, v) for t, v in samples]})
        return {"resultType": "matrix", "result": result}
    vector = []
    for s in chosen:
        value = _evaluate(query, s, at)
        if value is not None:
            vector.append({"metric": _result_labels(query, s), "value": _point(at, value)})
    return {"resultType": "vector", "result": vector}


def ranged(query: Query, series: Iterable[Series], start: float, end: float, step: float) -> dict[str, Any]:
    """The `data` of /api/v1/query_range."""
    if query.range is not None and query.function is None:
        raise QueryError(
            'invalid expression type "range vector" for range query, must be Scalar or instant Vector'
        )
    if (end - start) / step > MAX_POINTS:
        raise QueryError(
            "exceeded maximum resolution of 11,000 points per timeseries. "
            "Try decreasing the query resolution (?step=XX)"
        )
    times = [start + k * step for k in range(math.floor((end - start) / step) + 1)]
    result = []
    for s in (s for s in series if query.selects(s.labels)):
        points = [(t, v) for t in times if (v := _evaluate(query, s, t)) is not None]
        if points:
            result.append({"metric": _result_labels(query, s), "values": [_point(t, v) for t, v in points]})
    return {"resultType": "matrix", "result": result}


def _evaluate(query: Query, series: Series, at: float) -> float | None:
    if query.function is not None and query.range is not None:
        values = [v for _, v in series.samples(at - query.range, at)]
        return FUNCTIONS[query.function](values) if values else None
    if series.stale_from is not None and at >= series.stale_from:
        return None
    recent = series.samples(at - LOOKBACK, at)
    return recent[-1][1] if recent else None


def _result_labels(query: Query, series: Series) -> dict[str, str]:
    """Functions drop the metric name, as Prometheus does."""
    if query.function is None:
        return dict(series.labels)
    return {k: v for k, v in series.labels.items() if k != "__name__"}


def _point(t: float, value: float) -> list[Any]:
    return [round(t, 3), format_value(value)]


def format_value(value: float) -> str:
    """Prometheus' shortest form: 97, 0.97, 12.5."""
    return str(int(value)) if value.is_integer() else repr(value)
