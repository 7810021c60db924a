"""Core: spend by period (this ISO week, this month, in UTC) per user and per team-channel, as pure functions.

Two sources make a period's spend, and neither is Prometheus (a label per user would grow its series
without bound): finished runs, which the store keeps as one small table per UTC day (`day_table`: a
field per user, channel and measure), and running ones, worked out from their pods as the cluster holds
them now. A run is split by the hours it held its GPUs on each day, so one that spans a week's or a
month's start counts in each by its own hours.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

from bot.core import notices

RETENTION_SECONDS = 62 * 24 * 3600
"""How long a day's table is kept: past the longest month before this one, so "this month" is whole."""
TABLE_PREFIX = "spend:"
GPU_HOURS = "gpu_hours"
DOLLARS = "usd"
UNPRICED = "unpriced_hours"
MEASURES = (GPU_HOURS, DOLLARS, UNPRICED)
NAMES_TABLE = "slack-names"
"""Slack user name (lower case) → user id, of everyone whose run ended: `/gpu usage @alice` arrives as the
typed name, since the command does not ask Slack to escape mentions."""
FIELD_SEPARATOR = " "
"""Slack user and channel ids are upper-case letters and digits, so a space cannot occur inside one."""


class Period(enum.Enum):
    WEEK = "week"
    MONTH = "month"


@dataclass(frozen=True)
class Spend:
    """What one user's runs from one channel held and cost over some span."""

    user: str
    channel: str
    gpu_hours: float
    dollars: float = 0.0
    unpriced_hours: float = 0.0
    """GPU-hours of runs whose profile has no price: counted in `gpu_hours`, not in `dollars`."""


@dataclass(frozen=True)
class Held:
    """A run holding GPUs now, as its pod says: who, from where, how many, since when, at what price."""

    user: str
    channel: str
    gpus: int
    node_gpus: int
    since: datetime
    price_per_node_hour: float | None


@dataclass(frozen=True)
class Total:
    """One row of a usage answer: a user or a channel, with what they held and spent."""

    who: str
    gpu_hours: float
    dollars: float
    unpriced_hours: float = 0.0


@dataclass(frozen=True)
class Summary:
    period: Period
    since: datetime
    by_user: tuple[Total, ...]
    by_channel: tuple[Total, ...]

    def of(self, user: str) -> Total:
        """One user's total, zero if they spent nothing this period."""
        return next((t for t in self.by_user if t.who == user), Total(user, 0.0, 0.0))


# -- periods and days ---------------------------------------------------------------------------------


def period_start(period: Period, now: datetime) -> datetime:
    """Monday 00:00 UTC of this ISO week, or the 1st 00:00 UTC of this month."""
    today = now.astimezone(UTC).date()
    first = today - timedelta(days=today.weekday()) if period is Period.WEEK else today.replace(day=1)
    return datetime.combine(first, time(), UTC)


def days(since: datetime, until: datetime) -> list[date]:
    """The UTC days from `since`'s to `until`'s, both included."""
    first, last = since.astimezone(UTC).date(), until.astimezone(UTC).date()
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def day_table(day: date) -> str:
    """The store table of one UTC day's finished runs."""
    return f"{TABLE_PREFIX}{day.isoformat()}"


def day_shares(start: datetime, end: datetime) -> list[tuple[date, float]]:
    """The seconds of [start, end) that fall on each UTC day, in order; [] for an empty span."""
    shares = []
    for day in days(start, end) if end > start else []:
        day_start = datetime.combine(day, time(), UTC)
        lo, hi = max(start, day_start), min(end, day_start + timedelta(days=1))
        if hi > lo:
            shares.append((day, (hi - lo).total_seconds()))
    return shares


# -- what a run adds, what the store holds -------------------------------------------------------------


def held_cost(gpus: int, node_gpus: int, price_per_node_hour: float | None, seconds: float) -> Spend:
    """GPU-hours and money for `seconds` of `gpus` GPUs: the GPUs' share of their node's price."""
    gpu_hours = gpus * seconds / 3600
    if not price_per_node_hour:
        return Spend("", "", gpu_hours, 0.0, gpu_hours)
    share = gpus / max(node_gpus, gpus, 1)
    return Spend("", "", gpu_hours, price_per_node_hour * share * seconds / 3600)


def field(user: str, channel: str, measure: str) -> str:
    return FIELD_SEPARATOR.join((user, channel or "-", measure))


def finished_amounts(
    user: str, channel: str, *, start: datetime, end: datetime, gpu_hours: float, dollars: float | None
) -> dict[str, dict[str, float]]:
    """What a finished run adds to the store: day table → field → amount, split by its hours on each day.
    A run whose profile has no price adds its hours as unpriced instead of dollars."""
    total = (end - start).total_seconds()
    amounts: dict[str, dict[str, float]] = {}
    for day, seconds in day_shares(start, end):
        part = seconds / total
        fields = {field(user, channel, GPU_HOURS): gpu_hours * part}
        if dollars is None:
            fields[field(user, channel, UNPRICED)] = gpu_hours * part
        else:
            fields[field(user, channel, DOLLARS)] = dollars * part
        amounts[day_table(day)] = fields
    return amounts


def read_day(fields: Mapping[str, float]) -> list[Spend]:
    """A day's table back into spends; fields that are not ours are ignored."""
    measured: dict[tuple[str, str], dict[str, float]] = {}
    for name, amount in fields.items():
        parts = name.split(FIELD_SEPARATOR)
        if len(parts) == 3 and parts[2] in MEASURES:
            user, channel, measure = parts
            measured.setdefault((user, "" if channel == "-" else channel), {})[measure] = amount
    return [
        Spend(user, channel, found.get(GPU_HOURS, 0.0), found.get(DOLLARS, 0.0), found.get(UNPRICED, 0.0))
        for (user, channel), found in measured.items()
    ]


def running(held: Held, *, since: datetime, now: datetime) -> Spend:
    """What a running run has held and cost from the later of its start and `since`, until `now`."""
    seconds = max((now - max(held.since, since)).total_seconds(), 0.0)
    cost = held_cost(held.gpus, held.node_gpus, held.price_per_node_hour, seconds)
    return replace(cost, user=held.user, channel=held.channel)


# -- summing up ---------------------------------------------------------------------------------------


def summarize(period: Period, since: datetime, spends: Iterable[Spend]) -> Summary:
    """Totals by user and by channel, biggest spender first (then most GPU-hours, then by id)."""
    spends = list(spends)
    return Summary(
        period,
        since,
        _totals(spends, lambda s: s.user),
        _totals([s for s in spends if s.channel], lambda s: s.channel),
    )


def _totals(spends: list[Spend], key: Callable[[Spend], str]) -> tuple[Total, ...]:
    sums: dict[str, list[float]] = {}
    for spend in spends:
        who = key(spend)
        row = sums.setdefault(who, [0.0, 0.0, 0.0])
        row[0] += spend.gpu_hours
        row[1] += spend.dollars
        row[2] += spend.unpriced_hours
    totals = [Total(who, *row) for who, row in sums.items() if row[0] > 0 or row[1] > 0]
    return tuple(sorted(totals, key=lambda t: (-t.dollars, -t.gpu_hours, t.who)))


# -- words --------------------------------------------------------------------------------------------


def period_name(period: Period) -> str:
    return "this week" if period is Period.WEEK else "this month"


def since_text(summary: Summary) -> str:
    """ "since Monday 1 Dec (UTC)", "since 1 Dec (UTC)"."""
    day = summary.since
    if summary.period is Period.WEEK:
        return f"since Monday {day.day} {day:%b} (UTC)"
    return f"since {day.day} {day:%b} (UTC)"


def amount_text(total: Total) -> str:
    """ "$12.40 · 5.0 GPU-hours", with what no price covers said, and nothing spent said plainly."""
    if total.gpu_hours <= 0 and total.dollars <= 0:
        return "nothing yet"
    hours = f"{total.gpu_hours:.1f} GPU-hours"
    if total.unpriced_hours >= total.gpu_hours:
        return f"{hours} (no price set for their GPU type)"
    unpriced = f", {total.unpriced_hours:.1f} of them unpriced" if total.unpriced_hours > 0.05 else ""
    return f"{notices.format_cost(total.dollars)} · {hours}{unpriced}"
