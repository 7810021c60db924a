"""A seeded day of GPU use by a team, for the GPU-hours bench (P6): who asks for what, when, and for how long.

Pure and deterministic: the same seed makes the same trace, and a trace saved as JSON replays exactly.
Times are simulated seconds from midnight. Three kinds of users share the pool:

- batch users submit jobs that keep the GPU busy and exit (10 minutes to 10 hours, most near 1.5 h),
  one after another through their workday; a job longer than the default lease asks for `--hours`;
- interactive users open sessions (`sleep infinity`-style pods) in which the GPU is busy in bursts, with
  short pauses to read results and now and then a meeting; they release the pod when done, most at once,
  some only when they remember, an hour or two later;
- forgetful users work the same way but never release: the pod sits idle until something deletes it.

Every user has a reaction time for the bot's reminders and warnings (1-10 minutes), inside the reaper's
grace periods: the bench asks what the reaper reclaims from owners who answer, not from absent ones.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BATCH, INTERACTIVE, FORGETFUL = "batch", "interactive", "forgetful"
KINDS = (BATCH, INTERACTIVE, FORGETFUL)
SHARES = {BATCH: 0.55, INTERACTIVE: 0.30, FORGETFUL: 0.15}
"""Share of the team of each kind; every kind has at least one user."""
DAY = 24 * 3600.0
MINUTE, HOUR = 60.0, 3600.0
DEFAULT_LEASE_HOURS = 4.0
"""gpubot's default lease (bot/settings.py): a batch job that may outlast it asks for more."""
LAST_END = 23 * HOUR
"""Every job is meant to be over by 23:00, so the day's figures hold whole jobs."""
CHANNELS = 4
FORMAT = 1


@dataclass(frozen=True)
class User:
    id: str
    name: str
    kind: str
    channel: str
    reaction_seconds: float
    """How long this owner takes to answer a reminder or an idle warning."""


@dataclass(frozen=True)
class Job:
    name: str
    """The pod's name (`/gpu run --name`), unique in the trace."""
    user: str
    session: bool
    """An interactive session (`sleep infinity`, busy only in `busy`) rather than a batch job."""
    arrives: float
    length: float
    """Seconds the owner wants it from when it runs: the batch command's runtime, or the session's."""
    busy: tuple[tuple[float, float], ...]
    """Spans of GPU use, in seconds from Running; a batch job's is the whole run."""
    hours: float | None
    """The lease asked for with `--hours`; None takes the default."""
    release_after: float | None
    """Seconds after a session's end when the owner releases it; None: never (forgotten, or batch)."""

    @property
    def busy_seconds(self) -> float:
        return sum(end - start for start, end in self.busy)

    def busy_at(self, offset: float) -> bool:
        """Whether the GPU works `offset` seconds after the pod started running."""
        return any(start <= offset < end for start, end in self.busy)

    def command(self, image: str) -> str:
        """What the owner types after `/gpu`."""
        hours = f" --hours {self.hours:g}" if self.hours is not None else ""
        work = "sleep infinity" if self.session else f"sleep {int(self.length)}"
        return f"run {image} --name {self.name}{hours} -- {work}"


@dataclass(frozen=True)
class Trace:
    seed: int
    pool_max_nodes: int
    users: tuple[User, ...]
    jobs: tuple[Job, ...]
    day_seconds: float = DAY

    def user(self, user_id: str) -> User:
        return next(u for u in self.users if u.id == user_id)

    def demanded_busy_hours(self) -> float:
        return sum(job.busy_seconds for job in self.jobs) / HOUR

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=1)

    @staticmethod
    def from_json(text: str) -> Trace:
        data: dict[str, Any] = json.loads(text)
        if data.get("format") != FORMAT:
            raise ValueError(f"not a GPU-hours trace of format {FORMAT}: format={data.get('format')!r}")
        jobs = tuple(
            Job(**{**job, "busy": tuple((float(a), float(b)) for a, b in job["busy"])})
            for job in data["jobs"]
        )
        return Trace(
            seed=int(data["seed"]),
            pool_max_nodes=int(data["pool_max_nodes"]),
            users=tuple(User(**user) for user in data["users"]),
            jobs=jobs,
            day_seconds=float(data["day_seconds"]),
        )

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")

    @staticmethod
    def load(path: Path) -> Trace:
        return Trace.from_json(path.read_text())


# -- generating ---------------------------------------------------------------------------------------


def generate(seed: int, *, users: int = 40) -> Trace:
    """A workday for `users` people; the pool may grow to three quarters of the team, one GPU a node."""
    if users < len(KINDS):
        raise ValueError(f"a trace needs at least {len(KINDS)} users, one of each kind")
    rng = random.Random(seed)
    team = [_user(index, kind, rng) for index, kind in enumerate(_kinds(users), start=1)]
    jobs: list[Job] = []
    for user in team:
        jobs += _batch_jobs(user, rng) if user.kind == BATCH else _sessions(user, rng)
    jobs.sort(key=lambda job: (job.arrives, job.name))
    return Trace(seed=seed, pool_max_nodes=math.ceil(users * 0.75), users=tuple(team), jobs=tuple(jobs))


def _kinds(users: int) -> list[str]:
    forgetful = max(1, round(users * SHARES[FORGETFUL]))
    interactive = max(1, round(users * SHARES[INTERACTIVE]))
    return [BATCH] * (users - forgetful - interactive) + [INTERACTIVE] * interactive + [FORGETFUL] * forgetful


def _user(index: int, kind: str, rng: random.Random) -> User:
    return User(
        id=f"U_T{index:02d}",
        name=f"user{index:02d}",
        kind=kind,
        channel=f"C_TEAM{index % CHANNELS + 1}",
        reaction_seconds=_minutes(rng.uniform(1, 10)),
    )


def _day_start(rng: random.Random) -> float:
    """Most people start around nine; the earliest at half past seven, the latest at eleven."""
    return _minutes(min(max(rng.gauss(9 * 60, 45), 7.5 * 60), 11 * 60))


def _batch_jobs(user: User, rng: random.Random) -> list[Job]:
    start = _day_start(rng)
    leaves = start + rng.uniform(8, 9) * HOUR
    arrives = start + _minutes(rng.uniform(0, 60))
    jobs: list[Job] = []
    while arrives < leaves and len(jobs) < 4:
        length = _minutes(min(max(rng.lognormvariate(math.log(90), 0.8), 10), 600))
        length = min(length, LAST_END - arrives - 15 * MINUTE)
        if length < 10 * MINUTE:
            break
        jobs.append(
            Job(
                name=f"{user.name}-job{len(jobs) + 1}",
                user=user.id,
                session=False,
                arrives=arrives,
                length=length,
                busy=((0.0, length),),
                hours=_lease_hours(length),
                release_after=None,
            )
        )
        arrives += length + _minutes(rng.uniform(15, 90))
    return jobs


def _lease_hours(length: float) -> float | None:
    """A job that may run past the default lease, start-up included, asks for an hour more than it needs."""
    if length + 15 * MINUTE <= DEFAULT_LEASE_HOURS * HOUR:
        return None
    return float(min(math.ceil((length + 30 * MINUTE) / HOUR), 24))


def _sessions(user: User, rng: random.Random) -> list[Job]:
    start = _day_start(rng)
    leaves = start + rng.uniform(8, 9) * HOUR
    arrives = start + _minutes(rng.uniform(0, 90))
    jobs: list[Job] = []
    while arrives < leaves - HOUR and len(jobs) < 2:
        length = _minutes(rng.uniform(1.5, 5) * 60)
        length = min(length, LAST_END - arrives - 2 * HOUR)
        if length < 30 * MINUTE:
            break
        jobs.append(
            Job(
                name=f"{user.name}-nb{len(jobs) + 1}",
                user=user.id,
                session=True,
                arrives=arrives,
                length=length,
                busy=_bursts(length, rng),
                hours=None,
                release_after=_release_delay(user, rng),
            )
        )
        arrives += length + _minutes(rng.uniform(30, 120))
    return jobs


def _bursts(length: float, rng: random.Random) -> tuple[tuple[float, float], ...]:
    """Work in bursts of 15-60 minutes, pauses of 2-12 minutes, and one meeting in ten (50-70 minutes)."""
    spans, at = [], _minutes(rng.uniform(2, 8))  # opening the notebook, loading data
    while at < length:
        end = min(at + _minutes(rng.uniform(15, 60)), length)
        spans.append((at, end))
        meeting = rng.random() < 0.1
        at = end + _minutes(rng.uniform(50, 70) if meeting else rng.uniform(2, 12))
    return tuple(spans)


def _release_delay(user: User, rng: random.Random) -> float | None:
    if user.kind == FORGETFUL:
        return None
    if rng.random() < 0.25:  # went home, released it from the phone that evening
        return _minutes(rng.uniform(60, 150))
    return _minutes(rng.uniform(0, 10))


def _minutes(count: float) -> float:
    """Whole minutes, in seconds: the trace moves in minutes, as the reaper does."""
    return float(round(count)) * MINUTE
