"""Pre-warm schedules: "keep N nodes of a pool up on weekdays 09:00-18:00 Europe/Berlin", parsed and judged.

Written as admins type them, in config (`GPUBOT_WARM_SCHEDULES`, one per line) or after `/gpu warm`:
`gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin`. Days are `daily`, `weekdays`, `weekends`, a range
(`mon-thu`) or a list (`mon,wed,fri`). Outside its hours a schedule asks for nothing, so the pool can drain.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta

from bot.core import models

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
NAMED_DAYS = {"daily": DAYS, "weekdays": DAYS[:5], "weekends": DAYS[5:]}
EXAMPLE = "gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin"
MAX_WARM_NODES = 100
_SCHEDULE = re.compile(
    r"(?P<pool>[a-z0-9][-a-z0-9]*)\s+min\s+(?P<min>\d{1,9})\s+(?P<days>\S+)\s+"
    r"(?P<start>\d{1,2}:\d{2})-(?P<end>\d{1,2}:\d{2})\s+(?P<zone>\S+)"
)


WarmSchedule = models.WarmSchedule


def _refuse(problem: str) -> models.UsageError:
    return models.UsageError(problem, f"/gpu warm {EXAMPLE}")


def _days(text: str) -> tuple[str, ...] | None:
    if text in NAMED_DAYS:
        return NAMED_DAYS[text]
    if "-" in text:
        first, _, last = text.partition("-")
        if first in DAYS and last in DAYS and DAYS.index(first) <= DAYS.index(last):
            return DAYS[DAYS.index(first) : DAYS.index(last) + 1]
        return None
    picked = text.split(",")
    if all(day in DAYS for day in picked):
        return tuple(day for day in DAYS if day in picked)
    return None


def _time(text: str) -> time | None:
    hours, _, minutes = text.partition(":")
    if int(hours) > 23 or int(minutes) > 59:
        return None
    return time(int(hours), int(minutes))


def parse(text: str) -> WarmSchedule | models.UsageError:
    """One schedule, or a refusal that says what is wrong and shows a schedule that works."""
    found = _SCHEDULE.fullmatch(_lower_head(text))
    if found is None:
        return _refuse(f"`{text.strip()}` is not a schedule: write POOL min N DAYS HH:MM-HH:MM TIMEZONE.")
    days, start, end = _days(found["days"]), _time(found["start"]), _time(found["end"])
    if days is None:
        return _refuse(
            f"`{found['days']}` is not a set of days: use daily, weekdays, weekends, mon-fri or mon,wed."
        )
    if start is None or end is None:
        return _refuse(f"`{found['start']}-{found['end']}` is not a time range: use 24-hour HH:MM-HH:MM.")
    if start >= end:
        return _refuse("The warm hours must start before they end on the same day, e.g. 09:00-18:00.")
    minimum = int(found["min"])
    if not 1 <= minimum <= MAX_WARM_NODES:
        return _refuse(f"Keep between 1 and {MAX_WARM_NODES} nodes warm; 0 is what the pool does anyway.")
    try:
        zoneinfo.ZoneInfo(found["zone"])
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return _refuse(
            f"`{found['zone']}` is not a time zone; use an IANA name such as Europe/Berlin or UTC."
        )
    return WarmSchedule(found["pool"], minimum, days, start, end, found["zone"])


def _lower_head(text: str) -> str:
    """Lower-case everything but the time zone, whose IANA name is case-sensitive."""
    head, _, zone = text.strip().rpartition(" ")
    return f"{head.lower()} {zone}"


def active(schedule: WarmSchedule, now: datetime) -> bool:
    """Whether `now` (any aware time) falls in the schedule's hours, in its own time zone."""
    local = now.astimezone(zoneinfo.ZoneInfo(schedule.zone))
    return DAYS[local.weekday()] in schedule.days and schedule.start <= local.time() < schedule.end


def warm_cost(schedule: WarmSchedule, price_per_node_hour: float) -> float:
    """What the schedule costs a week at the least: its nodes kept up for its hours, used or not."""
    start = schedule.start.hour * 60 + schedule.start.minute
    end = schedule.end.hour * 60 + schedule.end.minute
    return schedule.min_nodes * len(schedule.days) * (end - start) / 60 * price_per_node_hour


# -- stored schedules --------------------------------------------------------------------------------------

STORED_KEY = "schedules"
"""The ConfigMap data key `/gpu warm` writes: one schedule per line, as an admin would type it."""


def stored_text(schedules: list[WarmSchedule]) -> str:
    return "".join(f"{describe(s)}\n" for s in schedules)


def read_stored(text: str) -> tuple[list[WarmSchedule], list[str]]:
    """The schedules, and the lines that are not one (a hand edit), which are skipped, not guessed at."""
    found, bad = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        parsed = parse(line)
        if isinstance(parsed, models.UsageError):
            bad.append(line.strip())
        else:
            found.append(parsed)
    return found, bad


# -- what to change, and when ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WarmChange:
    """One pool's min size to move from `before` to `after`."""

    pool: str
    before: int
    after: int
    schedule: WarmSchedule | None
    """The active schedule that asks for `after` (the largest); None when none is active."""
    capped_from: int | None = None
    """What the schedule asked for, when the pool's max size is smaller."""


def plan(
    schedules: list[WarmSchedule], bounds: Mapping[str, tuple[int, int]], now: datetime
) -> list[WarmChange]:
    """Changes that bring each pool in `bounds` (its current (min, max) sizes) to what the schedules want now.

    `bounds` holds every pool to judge: those with a schedule, and any whose schedule was just removed, so
    its min falls back to 0.
    """
    changes = []
    for pool, (low, high) in sorted(bounds.items()):
        on = [s for s in schedules if s.pool == pool and active(s, now)]
        top = max(on, key=lambda s: s.min_nodes, default=None)
        wanted = top.min_nodes if top else 0
        capped = wanted if wanted > high else None
        wanted = min(wanted, high)
        if wanted != low:
            changes.append(WarmChange(pool, low, wanted, top, capped))
        elif capped is not None:
            changes.append(WarmChange(pool, low, low, top, capped))
    return changes


def next_change(schedule: WarmSchedule, now: datetime) -> datetime:
    """When the schedule next turns on (or, while on, off), in its own time zone."""
    zone = zoneinfo.ZoneInfo(schedule.zone)
    local = now.astimezone(zone)
    if active(schedule, now):
        return datetime.combine(local.date(), schedule.end, zone)
    for offset in range(8):
        day = local.date() + timedelta(days=offset)
        starts = datetime.combine(day, schedule.start, zone)
        if DAYS[day.weekday()] in schedule.days and starts > local:
            return starts
    raise AssertionError("a schedule has at least one day a week")  # parse() never makes one without


def cron_fields(schedule: WarmSchedule) -> list[dict[str, str | int]]:
    """APScheduler cron trigger fields for the schedule's two edges, in its own zone, so DST is its own."""
    return [
        {"day_of_week": schedule.cron_days, "hour": at.hour, "minute": at.minute, "timezone": schedule.zone}
        for at in (schedule.start, schedule.end)
    ]


# -- words -------------------------------------------------------------------------------------------------


def days_text(days: tuple[str, ...]) -> str:
    """`weekdays`, `mon-thu` or `mon,wed,fri`: as short as the parser reads back."""
    for name, named in NAMED_DAYS.items():
        if days == named:
            return name
    first = DAYS.index(days[0])
    if len(days) > 2 and days == DAYS[first : first + len(days)]:
        return f"{days[0]}-{days[-1]}"
    return ",".join(days)


def describe(schedule: WarmSchedule) -> str:
    hours = f"{schedule.start:%H:%M}-{schedule.end:%H:%M}"
    return f"{schedule.pool} min {schedule.min_nodes} {days_text(schedule.days)} {hours} {schedule.zone}"


def _when(moment: datetime, zone: str) -> str:
    return f"{moment:%a %H:%M} {zone}"


def _nodes(count: int) -> str:
    return f"{count} node{'' if count == 1 else 's'}"


def change_text(change: WarmChange, now: datetime, price_per_node_hour: float | None) -> str:
    """The channel's notice when warm capacity starts, moves or stops."""
    schedule = change.schedule
    cost = ""
    if price_per_node_hour and change.after:
        cost = f"; ≈ ${change.after * price_per_node_hour:.2f}/h while warm, used or not"
    if change.capped_from is not None and schedule is not None:
        capped = (
            f":warning: `{describe(schedule)}` asks for {_nodes(change.capped_from)} but {change.pool} "
            f"can have at most {change.after}: keeping {change.after} warm. "
            f"Fix: `gpubot pool set {change.pool} --max {change.capped_from}`"
        )
        if change.before == change.after:
            return capped
        return f"{capped}\n" + change_text(replace(change, capped_from=None), now, price_per_node_hour)
    if schedule is None:
        return (
            f":snowflake: Warm capacity off: {change.pool} min {change.before}→0, so it drains to zero "
            "once its nodes are idle."
        )
    until = _when(next_change(schedule, now), schedule.zone)
    if change.before == 0:
        return (
            f":fire: Warm capacity on: {change.pool} keeps {_nodes(change.after)} up until {until} "
            f"(`{describe(schedule)}`){cost}."
        )
    return (
        f":fire: Warm capacity now {_nodes(change.after)} (was {change.before}) on {change.pool} until "
        f"{until} (`{describe(schedule)}`){cost}."
    )


def schedule_line(
    number: int, schedule: WarmSchedule, now: datetime, price_per_node_hour: float | None, *, configured: bool
) -> str:
    """One line of `/gpu warm` and `/gpu status`: whether it is on, until or from when, and its cost."""
    moment = _when(next_change(schedule, now), schedule.zone)
    state = f"on now, until {moment}" if active(schedule, now) else f"off, next on {moment}"
    cost = f" · ≈ ${warm_cost(schedule, price_per_node_hour):.2f}/week" if price_per_node_hour else ""
    source = " · from config" if configured else ""
    return f"{number}. `{describe(schedule)}` · {state}{cost}{source}"
