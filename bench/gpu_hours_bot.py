"""The GPU-hours bench's gpubot arm: the real bot, on the sim's manual clock, with owners who answer it.

The bot is `bot.app.build` with its default reaper policy and quota (bot/settings.py), its idleness read
from the sim's Prometheus, and a scale channel, in this process as the soak runs it. Owners type `/gpu run`
and `/gpu release` in Slack (the emulator) at their trace times. Instead of its wall-clock timers, the bench
runs the bot's reaper round and tick once per simulated minute (the reaper's default interval), after the
bot has caught up with the sim (its informers hold every pod and node as the sim does, its outbox is empty).

An owner answers each reminder or idle warning `reaction_seconds` after it, by pressing a button on the
bot's message: Extend on a lease reminder, Keep on an idle warning, when still using the pod (a job whose
command runs, a session not yet over); otherwise the owner ignores it.

What this costs in fidelity: the outbox's pacing is lifted (the emulator does not rate-limit either), since
a simulated minute passes in milliseconds, so the bot's messages take no simulated time; and its 15 s tick
(slow-node and drain notices, which never delete) runs once a simulated minute, with the reaper's round.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import gpu_hours_ledger, trace
from bench.gpu_hours_replay import CUDA, Reap
from bot import runtime, settings
from bot.adapters import slack_outbox, slack_render, store
from bot.cli import demo
from bot.core import labels, reaping
from bot.testing import runner, stages
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import User

Json = dict[str, Any]
OPS = demo.OPS_CHANNEL
"""The scale channel: the demo settings these build on post there."""
WAIT = 30.0
"""Real seconds the bot may take to answer one thing; reached only when something is broken."""
NEVER = 10**6
"""Real seconds for the bot's own timers: the bench runs its rounds itself."""
UNLIMITED = slack_outbox.OutboxSettings(
    channel_messages_per_second=1000.0,
    channel_message_burst=1000,
    method_per_minute={"chat.update": 10**6, "chat.postEphemeral": 10**6, "conversations.open": 10**6},
)
ASKING = {
    reaping.Act.REMIND: slack_render.EXTEND_ACTION,
    reaping.Act.NUDGE: slack_render.EXTEND_ACTION,
    reaping.Act.IDLE_WARN: slack_render.KEEP_ACTION,
}
"""The acts that ask the owner something, and the button an owner still using the pod presses."""
DEFAULT_REAPER = settings.ReaperSettings()
ACKED = "Requesting "
"""How the bot's ack of a run begins; any other answer to the owner, with no pod, is a refusal."""


class GpubotArm:
    name = "gpubot"

    def __init__(
        self,
        day: trace.Trace,
        sim: world.BackgroundWorld,
        slack: BackgroundSlack,
        bot: runtime.Bot,
        ledger: gpu_hours_ledger.Ledger,
    ) -> None:
        self.trace, self.sim, self.slack, self.bot, self.ledger = day, sim, slack, bot, ledger
        self.jobs = {job.name: job for job in day.jobs}
        self.answers: list[tuple[float, str, reaping.Act]] = []
        """(due, job, act): an owner's answer to come."""
        self.acts: Counter[str] = Counter()
        self.clicks: Counter[str] = Counter()

    # -- owners ------------------------------------------------------------------------------
    def submit(self, jobs: list[trace.Job]) -> list[str]:
        """Everyone due types at once, as a busy channel does; wait for each pod, or the bot's refusal."""
        users = self.slack.emulator.users
        before = {job.name: len(self._ephemerals(job.user)) for job in jobs}
        typed = [(job.user, self.trace.user(job.user).channel, job.command(CUDA)) for job in jobs]

        async def everyone() -> list[Any]:
            return await asyncio.gather(*(users.type_command(u, c, "/gpu", t) for u, c, t in typed))

        deliveries = self.slack.call(everyone, timeout=120)
        if unacked := [d for d in deliveries if not d.acked]:
            raise RuntimeError(f"{len(unacked)} commands not acked, e.g. {unacked[0]}")
        return [
            job.name for job in jobs if not isinstance(self._made_or_refused(job, before[job.name]), dict)
        ]

    def _made_or_refused(self, job: trace.Job, seen: int) -> Json | str:
        found: Json | str = self._wait(lambda: self._pod(job.name) or self._told(job, seen))
        return found

    def release(self, job: trace.Job) -> None:
        self.slack.type_command(job.user, self.trace.user(job.user).channel, "/gpu", f"release {job.name}")
        self._wait(lambda: (pod := self._pod(job.name)) is None or pod["metadata"].get("deletionTimestamp"))

    def _told(self, job: trace.Job, seen: int) -> str:
        """The bot's ephemeral answer to the owner since they typed: a refusal, when no pod comes."""
        found = [text for text in self._ephemerals(job.user)[seen:] if not text.startswith(ACKED)]
        return found[-1] if found else ""

    def _answer(self, now: float) -> bool:
        """True if an owner pressed a button."""
        pressed = False
        due, self.answers = (
            [a for a in self.answers if a[0] <= now],
            [a for a in self.answers if a[0] > now],
        )
        for _, name, act in due:
            pod = self._pod(name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            if not self._still_using(name, now):
                self.clicks["ignored"] += 1
                continue
            pressed = self._press(name, pod, ASKING[act]) or pressed
        return pressed

    def _still_using(self, name: str, now: float) -> bool:
        times = self.ledger.pods.get(name)
        if times is None or times.finished is not None:
            return False
        return times.running is None or gpu_hours_ledger.wanted(self.jobs[name], times.running, now)

    def _press(self, name: str, pod: Json, action_id: str) -> bool:
        """The owner presses the button on the newest message in the thread that carries it."""
        job = self.jobs[name]
        channel = self.trace.user(job.user).channel
        thread = (pod["metadata"].get("annotations") or {}).get(labels.THREAD_TS_ANNOTATION, "")
        carrying = [ts for ts, blocks in self._thread(channel, thread) if action_id in blocks]
        if not carrying:
            self.clicks["no button"] += 1
            return False
        version = pod["metadata"]["resourceVersion"]
        self.slack.click_button(job.user, channel, carrying[-1], action_id)
        self._wait(lambda: (now := self._pod(name)) is None or now["metadata"]["resourceVersion"] != version)
        self.clicks[action_id.removeprefix("gpubot_")] += 1
        return True

    # -- the bot's rounds --------------------------------------------------------------------
    def round(self, now: float) -> list[Reap]:
        """Owners' answers now due, then one reaper round and one tick, each on what the bot has seen."""
        self._caught_up()
        if self._answer(now):
            self._caught_up()
        reaps = []
        for done in self.bot.reap():
            name = done.workload.rpartition("/")[2]
            self.acts[done.act.value] += 1
            if done.act in ASKING:
                self.answers.append(
                    (now + self.trace.user(self.jobs[name].user).reaction_seconds, name, done.act)
                )
            if done.act in reaping.REAPING or done.act is reaping.Act.FINISH_DELETE:
                reaps.append(Reap(name, now, done.act.value))
        self.bot.tick()
        return reaps

    def notes(self) -> Json:
        return {"reaper acts": dict(self.acts), "owner answers": dict(self.clicks)}

    # -- reading the sim and the bot ---------------------------------------------------------
    def _pod(self, name: str) -> Json | None:
        found: Json | None = self.sim.run(
            lambda: self.sim.world.store.get("pods", gpu_hours_ledger.NAMESPACE, name)
        )
        return found

    def _ephemerals(self, user: str) -> list[str]:
        """What `user` was shown, oldest first; read in place, as the transcript grows long in a day."""
        workspace = self.slack.emulator.workspace
        return self.slack.run(lambda: [e.text for e in workspace.ephemerals if e.user == user])

    def _thread(self, channel: str, thread_ts: str) -> list[tuple[str, str]]:
        """(ts, blocks as text) of a thread's replies, oldest first."""
        workspace = self.slack.emulator.workspace

        def read() -> list[tuple[str, str]]:
            replies = [
                m for (c, _), m in workspace.messages.items() if c == channel and m.thread_ts == thread_ts
            ]
            return [
                (m.ts, str(m.blocks)) for m in sorted(replies, key=lambda m: float(m.ts)) if not m.deleted
            ]

        return self.slack.run(read)

    def _wait(self, done: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + WAIT
        while not (found := done()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not answer within {WAIT:g} s")
            time.sleep(0.005)
        return found

    def _caught_up(self) -> None:
        """Until the tracker holds every gpubot pod as the sim does, the node informer every node, and
        the outbox has sent everything: the bot has heard and said all there is so far."""
        self._wait(self._in_step)

    def _in_step(self) -> bool:
        pods = self.sim.run(
            lambda: {
                (p["metadata"]["name"], p["metadata"]["resourceVersion"])
                for p in self.sim.world.store.iter_raw("pods")
                if (p["metadata"].get("labels") or {}).get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
            }
        )
        threads = self.bot.services.tracker.threads().values()
        if (
            pods != {(t.workload.name, t.workload.resource_version) for t in threads}
            or self.bot.outbox.depth()
        ):
            return False
        nodes = self.sim.run(
            lambda: {
                (n["metadata"]["name"], n["metadata"]["resourceVersion"])
                for n in self.sim.world.store.iter_raw("nodes")
            }
        )
        informer = next(i for i in self.bot.cluster.informers if i.source.kind == "Node")
        cached = {
            (o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in list(informer.cache.values())
        }
        return nodes == cached


# -- the stage ---------------------------------------------------------------------------------------


def slack_config(day: trace.Trace) -> SlackConfig:
    channels = sorted({(u.channel, u.channel.lower().replace("c_", "gpu-")) for u in day.users})
    return SlackConfig(
        users=tuple(User(u.id, u.name) for u in day.users),
        channels=(*channels, (OPS, "gpu-ops")),
        rate_limits=RateLimitConfig(enabled=False),
    )


def bot_settings(stage: stages.Stage, reaper: settings.ReaperSettings = DEFAULT_REAPER) -> settings.Settings:
    """A deployment's defaults (or the reaper settings given), with the sim's Prometheus for idleness and
    one replica."""
    demo = stages.bot_settings(stage, scale_channel=OPS)
    return dataclasses.replace(
        demo,
        # The ledger and the baseline replay count pods in one namespace, the sim's `default`.
        cluster=dataclasses.replace(demo.cluster, namespace=gpu_hours_ledger.NAMESPACE),
        quota=settings.QuotaSettings(),
        reaper=dataclasses.replace(reaper, prometheus_url=stage.sim.url),
        leader=settings.LeaderSettings(enabled=False),
        log_level="WARNING",
    )


@contextlib.contextmanager
def gpubot_arm(
    day: trace.Trace,
    sim: world.BackgroundWorld,
    ledger: gpu_hours_ledger.Ledger,
    *,
    redis_url: str = "",
    reaper: settings.ReaperSettings = DEFAULT_REAPER,
) -> Iterator[GpubotArm]:
    """The bot on `sim`, with a Slack emulator of the trace's team, and a Redis of its own unless given.
    The bench runs the reaper's rounds and the timers' ticks itself."""
    with (
        tempfile.TemporaryDirectory(prefix="gpubot-gpu-hours-") as tmp,
        BackgroundSlack(slack_config(day)) as slack,
        contextlib.nullcontext(redis_url) if redis_url else store.private_redis_server() as redis,
    ):
        stage = stages.Stage(sim, slack, redis or store.MEMORY_URL, Path(tmp))
        with runner.running_bot(
            bot_settings(stage, reaper),
            slack,
            reaper_timer=False,
            wait=WAIT,
            clock=sim.world.clock.datetime,
            outbox_settings=UNLIMITED,
            tick_seconds=NEVER,
        ) as bot:
            yield GpubotArm(day, sim, slack, bot, ledger)
