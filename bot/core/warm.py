"""Pre-warm schedules: "keep N nodes of a pool up on weekdays 09:00-18:00 Europe/Berlin", parsed and judged.

Written as admins type them, in config (`GPUBOT_WARM_SCHEDULES`, one per line) or after `/gpu warm`:
`gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin`. Days are `daily`, `weekdays`, `weekends`, a range
(`mon-thu`) or a list (`mon,wed,fri`). Outside its hours a schedule asks for nothing, so the pool can drain.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import datetime, time

from bot.core import models

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
NAMED_DAYS = {"daily": DAYS, "weekdays": DAYS[:5], "weekends": DAYS[5:]}
EXAMPLE = "gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin"
MAX_WARM_NODES = 100
_SCHEDULE = re.compile(
    r"(?P<pool>[a-z0-9][-a-z0-9]*)\s+min\s+(?P<min>\d+)\s+(?P<days>\S+)\s+"
    r"(?P<start>\d{1,2}:\d{2})-(?P<end>\d{1,2}:\d{2})\s+(?P<zone>\S+)"
)


@dataclass(frozen=True)
class WarmSchedule:
    pool: str
    min_nodes: int
    days: tuple[str, ...]
    """Three-letter day names, Monday first, as APScheduler's cron `day_of_week` takes them."""
    start: time
    end: time
    zone: str

    @property
    def text(self) -> str:
        hours = f"{self.start:%H:%M}-{self.end:%H:%M}"
        return f"{self.pool} min {self.min_nodes} {self.cron_days} {hours} {self.zone}"

    @property
    def cron_days(self) -> str:
        return ",".join(self.days)


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


def wanted_min(schedules: list[WarmSchedule], pool: str, now: datetime) -> int:
    """The pool's min size now: the largest active schedule's, else 0 so it drains."""
    return max((s.min_nodes for s in schedules if s.pool == pool and active(s, now)), default=0)


def warm_cost(schedule: WarmSchedule, price_per_node_hour: float) -> float:
    """What the schedule costs a week at the least: its nodes kept up for its hours, used or not."""
    start = schedule.start.hour * 60 + schedule.start.minute
    end = schedule.end.hour * 60 + schedule.end.minute
    return schedule.min_nodes * len(schedule.days) * (end - start) / 60 * price_per_node_hour
