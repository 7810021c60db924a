"""The GPU-hours bench's replay: one trace, one fresh sim per arm, the same clock steps and measures in each.

Every arm runs on the sim's manual clock, one simulated minute per step (the reaper's default interval), in
four 15 s sub-steps, each followed by a scrape. Users act at their trace times: a run at its
arrival; a session's GPU turns busy and idle with its trace, counted from when its pod runs (the sim's
`sim.gpubot.dev/gpu-util` annotation, which its DCGM exporter model reads); a session's owner releases it
`release_after` past its end. The sim's Cluster Autoscaler grows and shrinks the pool in every arm. While the
pool is empty and nothing waits, the clock jumps to the next arrival (nothing is billed or busy meanwhile);
the sim starts on the whole hour at least half an hour before the first arrival, and the replay ends when
nothing is left to happen.

What differs is only the arm: who deletes pods, and whether owners can extend them:
- no reaper: pods live until their command ends or their owner releases them; forgotten ones live on
  to the end of the day, where billing stops;
- time-only culler: also deletes every pod 4 hours after its creation, busy or not, wanted or not;
- gpubot: the real bot (bench/gpu_hours_bot.py), with its owners answering its reminders.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from kubernetes import client

from bench import figures, gpu_hours_ledger, trace
from bot import profiles, settings
from bot.core import commands, models, podspec
from sim.cluster import metrics, world

Json = dict[str, Any]
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
STEP = 60.0
SUBSTEPS = 4
BUSY, IDLE = str(metrics.BUSY_PERCENT), "0"
CULL_AFTER = 4 * 3600.0
"""The time-only culler's fixed lease: gpubot's default lease, without reminders, extensions or idleness."""
DRIVER_AGENT = "gpubot-bench/gpu-hours"


@dataclass(frozen=True)
class Reap:
    job: str
    at: float
    why: str


class Arm(Protocol):
    name: str

    def submit(self, jobs: list[trace.Job]) -> list[str]:
        """Owners ask for these now; returns the names refused (none for the baselines)."""

    def release(self, job: trace.Job) -> None: ...

    def round(self, now: float) -> list[Reap]:
        """Once a simulated minute: what this arm deleted on its own."""

    def notes(self) -> Json:
        """Arm-specific counts for the report."""


@dataclass
class Outcome:
    arm: str
    billed_node_hours: float
    busy_gpu_hours: float
    time_to_running_minutes: list[float]
    never_ran: list[str]
    refused: list[str]
    reaps: list[Reap]
    wrongful: list[Json]
    state_hours: dict[str, float]
    pool_size: list[tuple[float, int]]
    held: list[Json]
    """Pods that lived on after their owner was done with them: how long, and what ended them."""
    wall_seconds: float
    notes: Json = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.billed_node_hours / self.busy_gpu_hours if self.busy_gpu_hours else float("inf")

    def percentile(self, share: float) -> float:
        """Nearest rank, as every bench reports it; NaN when no pod ran."""
        values = self.time_to_running_minutes
        return figures.percentile(values, share * 100) if values else float("nan")


def origin(day: trace.Trace) -> float:
    """Where the sim's clock starts in the trace's day: the whole hour at least 30 minutes before the first
    arrival. The pool is empty before it, so nothing is billed or busy there."""
    first = min((job.arrives for job in day.jobs), default=0.0)
    return max(0.0, (first - 1800) // 3600 * 3600)


class Replay:
    def __init__(self, day: trace.Trace, sim: world.BackgroundWorld, ledger: gpu_hours_ledger.Ledger) -> None:
        self.trace, self.sim, self.ledger = day, sim, ledger
        self.jobs = {job.name: job for job in day.jobs}
        self.scrapes = gpu_hours_ledger.Scrapes(self.jobs, ledger)
        self.util: dict[str, str] = {}
        self.released: set[str] = set()

    def run(self, arm: Arm, *, until: float | None = None) -> Outcome:
        started = time.monotonic()
        end = min(until or self.trace.day_seconds, self.trace.day_seconds)
        arrivals = sorted(self.trace.jobs, key=lambda job: (job.arrives, job.name))
        refused: list[str] = []
        reaps: list[Reap] = []
        now = self.ledger.now()
        while now < end and (arrivals or not self._quiet()):
            due = [job for job in arrivals if job.arrives <= now]
            arrivals = arrivals[len(due) :]
            if due:
                refused += arm.submit(due)
            for job in self._releases_due(now):
                arm.release(job)
                self.released.add(job.name)
            for _ in range(SUBSTEPS):
                self._set_utilisation()
                self.sim.advance(STEP / SUBSTEPS, step=1)
                self.scrapes.take(self.sim)
            now = self.ledger.now()
            reaps += arm.round(now)
            now = self._skip_quiet(now, arrivals, end)
        return Outcome(
            arm=arm.name,
            billed_node_hours=self.ledger.billed_hours(end),
            busy_gpu_hours=self.scrapes.busy_hours(),
            time_to_running_minutes=self._waits(),
            never_ran=sorted(n for n in self.jobs if (t := self._times(n)) is None or t.running is None),
            refused=refused,
            reaps=reaps,
            wrongful=[w for r in reaps if (w := self._wrongful(r))],
            state_hours=self.scrapes.state_hours(),
            pool_size=self.scrapes.pool_size,
            held=self._held(reaps, end),
            wall_seconds=time.monotonic() - started,
            notes=arm.notes(),
        )

    # -- users -------------------------------------------------------------------------------
    def _times(self, name: str) -> gpu_hours_ledger.PodTimes | None:
        return self.ledger.pods.get(name)

    def _live(self, name: str) -> bool:
        times = self._times(name)
        return times is not None and times.deleted is None and times.finished is None

    def _releases_due(self, now: float) -> list[trace.Job]:
        due = []
        for job in self.jobs.values():
            times = self._times(job.name)
            if (
                job.release_after is None
                or job.name in self.released
                or times is None
                or times.running is None
            ):
                continue
            if now >= times.running + job.length + job.release_after and self._live(job.name):
                due.append(job)
        return due

    def _set_utilisation(self) -> None:
        """Each live pod's GPU as its trace says now; written only when it changes."""
        now = self.ledger.now()
        changes = {}
        for name, job in self.jobs.items():
            times = self._times(name)
            if times is None or times.deleted is not None:
                continue
            if not job.session:
                wanted = BUSY
            else:
                wanted = BUSY if times.running is not None and job.busy_at(now - times.running) else IDLE
            if self.util.get(name) != wanted:
                changes[name] = wanted
        if changes:
            self.sim.run(lambda: self._annotate(changes))
            self.util.update(changes)

    def _annotate(self, changes: dict[str, str]) -> None:
        store = self.sim.world.store
        for name, percent in changes.items():

            def note(pod: Json, percent: str = percent) -> None:
                pod["metadata"].setdefault("annotations", {})[metrics.UTIL_ANNOTATION] = percent

            store.mutate("pods", gpu_hours_ledger.NAMESPACE, name, note)

    def _quiet(self) -> bool:
        """Nothing live, no machine billed: until the next arrival, nothing can be billed or busy."""
        machines = self.scrapes.pool_size[-1][1] if self.scrapes.pool_size else 0
        return not machines and not any(self._live(name) for name in self.jobs)

    def _skip_quiet(self, now: float, arrivals: list[trace.Job], end: float) -> float:
        """Jump to the minute of the next arrival while all is quiet."""
        if not arrivals or not self._quiet():
            return now
        target = min(arrivals[0].arrives, end)
        if target - now < 2 * STEP:
            return now
        self.sim.advance(target - now, step=STEP)
        self.scrapes.pool_size.append((self.ledger.now(), 0))
        return self.ledger.now()

    # -- judging -----------------------------------------------------------------------------
    def _waits(self) -> list[float]:
        waits = []
        for job in self.trace.jobs:
            times = self._times(job.name)
            if times is not None and times.running is not None:
                waits.append((times.running - job.arrives) / 60)
        return waits

    def _held(self, reaps: list[Reap], end: float) -> list[Json]:
        """Each pod's life past its owner's need, longest first; a batch job's ends with its command."""
        ended_by = {reap.job: reap.why for reap in reaps}
        held = []
        for job in self.trace.jobs:
            times = self._times(job.name)
            if times is None or times.running is None or times.finished is not None:
                continue
            done = times.running + job.length
            gone = min(times.deleted if times.deleted is not None else end, end)
            if gone <= done:
                continue
            how = ended_by.get(job.name) or ("released" if job.name in self.released else "end of day")
            owner = self.trace.user(job.user).kind
            held.append(
                {"job": job.name, "owner": owner, "hours": round((gone - done) / 3600, 2), "ended": how}
            )
        return sorted(held, key=lambda h: -float(h["hours"]))

    def _wrongful(self, reap: Reap) -> Json | None:
        """A pod deleted by the arm while its owner still wanted it: a job before its command ended, a
        session before its owner was done (or either before it ever ran)."""
        job, times = self.jobs.get(reap.job), self._times(reap.job)
        if job is None or times is None:
            return None
        if times.running is not None and not gpu_hours_ledger.wanted(job, times.running, reap.at):
            return None
        offset = reap.at - times.running if times.running is not None else None
        busy = offset is not None and job.busy_at(offset)
        after = offset or 0.0
        lost = sum(max(end - max(start, after), 0.0) for start, end in job.busy)
        return {
            "job": reap.job,
            "at": reap.at,
            "why": reap.why,
            "busy": busy,
            "ran_seconds": offset,
            "lost_busy_seconds": lost,
        }


# -- the baselines ---------------------------------------------------------------------------------


class Direct:
    """Owners make the pods themselves (`kubectl apply` of the very pod `/gpu run` makes), and delete them."""

    name = "no reaper"

    def __init__(self, day: trace.Trace, sim: world.BackgroundWorld, ledger: gpu_hours_ledger.Ledger) -> None:
        self.trace, self.sim, self.ledger = day, sim, ledger
        api = client.ApiClient(client.Configuration(host=sim.url))
        api.user_agent = DRIVER_AGENT
        self.core = client.CoreV1Api(api)
        config = settings.Settings(slack=settings.SlackSettings("unused"))
        catalog = profiles.read_profile_catalog(config)
        self.profile = catalog.profiles[catalog.default]
        self.policy = config.policy()

    def submit(self, jobs: list[trace.Job]) -> list[str]:
        for job in jobs:
            self.core.create_namespaced_pod(gpu_hours_ledger.NAMESPACE, self.manifest(job))  # type: ignore[arg-type]
        return []

    def manifest(self, job: trace.Job) -> Json:
        request = commands.parse_gpu_command(job.command(CUDA))
        assert isinstance(request, models.RunRequest), request
        user = self.trace.user(job.user)
        lease = request.hours if request.hours is not None else self.policy.default_lease_hours
        return podspec.build_pod(
            request,
            self.profile,
            models.Owner(user_id=user.id, user_name=user.name, team_id="T_GPULAB"),
            now=self.sim.world.clock.datetime(),  # the bot's clock too: lease ends are alike in every arm
            lease=timedelta(hours=lease),
            channel=user.channel,
            thread_ts=None,
            namespace=gpu_hours_ledger.NAMESPACE,
        )

    def release(self, job: trace.Job) -> None:
        self.delete(job.name)

    def delete(self, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, gpu_hours_ledger.NAMESPACE)
        except client.ApiException as err:
            if err.status != 404:
                raise

    def round(self, now: float) -> list[Reap]:
        return []

    def notes(self) -> Json:
        return {}


class TimeOnlyCuller(Direct):
    """Deletes every pod `CULL_AFTER` after its creation, once a minute; no reminders, no idleness."""

    name = "time-only culler"

    def __init__(self, day: trace.Trace, sim: world.BackgroundWorld, ledger: gpu_hours_ledger.Ledger) -> None:
        super().__init__(day, sim, ledger)
        self.culled: set[str] = set()

    def round(self, now: float) -> list[Reap]:
        reaps = []
        for name, times in list(self.ledger.pods.items()):
            if name in self.culled or times.deleted is not None or times.finished is not None:
                continue
            if now - times.created >= CULL_AFTER:
                self.delete(name)
                self.culled.add(name)
                reaps.append(Reap(name, now, "lease"))
        return reaps

    def notes(self) -> Json:
        return {"culled": len(self.culled)}
