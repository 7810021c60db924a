"""The soak: thousands of workloads through their whole life, on the sim's manual clock, with the real bot.

`python -m tests.restarts.soak --workloads 10000` (what `make soak` runs) prints the figures; the restart
tests run a small one. Workloads arrive in seeded batches, spread over many users and channels, and end
every way one can: released by their owner, expired by the reaper after its reminders, released as idle
by the GPU metric, failed (a command that exits 1, an image that cannot be pulled), or succeeded and
cleaned up. At the end no gpubot pod may be left, the pool must be back at zero nodes, and every thread's
root must show a final state.

What makes thousands feasible: the clock is stepped by hand, so an hour of cluster time costs only what
the bot needs to keep up with it; the pool may grow to a few hundred nodes, so the queue stays short; and
arrivals come in batches typed at once. The bot runs in this process, with Slack's pacing lifted, since the
emulator is told not to rate-limit: what Slack's real limits make of that is in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import runtime, settings
from bot.adapters import slack_outbox
from bot.cli import demo
from bot.core import labels
from bot.testing import runner, stages
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import DEFAULT_USERS, User
from tests.restarts import ledger, processes

CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
BAD_IMAGE = "nvcr.io/notfound/trainer:1"
POOL = "gpu-pool"
OPS = demo.OPS_CHANNEL
"""The scale channel: the demo settings these build on post there."""
KINDS = {
    "release": 0.35,
    "expire": 0.20,
    "idle": 0.15,
    "fail": 0.12,
    "succeed": 0.10,
    "bad-image": 0.08,
}
"""How each workload ends, and how often."""
UNLIMITED = slack_outbox.OutboxSettings(
    channel_messages_per_second=1000.0,
    channel_message_burst=1000,
    method_per_minute={"chat.update": 10**6, "chat.postEphemeral": 10**6, "conversations.open": 10**6},
)
TICK_EVERY = 4
"""Clock steps per timer tick (the slow-node check, the drain check): about once a simulated minute."""
NEVER = 10**6
"""Real seconds for the bot's own timers: the soak runs reaper rounds and ticks itself, once per step."""
SAID = {
    "reminded": ":hourglass_flowing_sand: The lease",
    "nudged": ":alarm_clock:",
    "idle-warned": ":zzz:",
    "released": ": Released by its owner;",
    "expired": ":wastebasket: Deleted",
    "idle-released": ":wastebasket: Released",
    "cleaned up": ":broom: Cleaned up the finished pod",
    "cluster-cleaned": ":broom: Cleaned up by the cluster",
}
"""The words of each reaper act in a thread, and of a release in its root's headline (an owner's own
release notifies nobody), to count them."""
ENDED_BY: dict[str, tuple[set[str], ...]] = {
    "release": ({"released"},),
    "expire": ({"reminded", "nudged", "expired"},),
    "idle": ({"idle-warned", "idle-released"},),
    "fail": ({"cleaned up"}, {"cluster-cleaned"}),
    "succeed": ({"cleaned up"}, {"cluster-cleaned"}),
    "bad-image": ({"reminded", "nudged", "expired"},),
}
"""What each planned ending must have said in its workload's thread: all of one of the alternatives. A
finished pod is cleaned up by the reaper, or first by a scale-down that takes it with its node."""
STEP_WAIT = 30.0
"""Real seconds one clock step may take the bot to catch up before the soak gives up on it."""


@dataclass(frozen=True)
class SoakConfig:
    workloads: int = 10_000
    seed: int = 1
    batch: int = 20
    """Workloads typed at once."""
    gap: float = 60.0
    """Simulated seconds between batches."""
    stride: float = 15.0
    """Simulated seconds per clock step."""
    max_nodes: int = 300
    users: int = 200
    channels: int = 40
    tail: float = 4 * 3600.0
    """Simulated seconds after the last arrival for everything to end and the pool to drain."""


@dataclass(frozen=True)
class Planned:
    name: str
    kind: str
    user: str
    channel: str
    arrives: float
    """Simulated seconds from the start."""
    release_after: float = 0.0
    """For `release`: simulated seconds after arriving."""

    @property
    def text(self) -> str:
        commands = {
            "release": f"run {CUDA} --name {self.name} -- python train.py",
            "expire": f"run {CUDA} --name {self.name} --hours 0.1 -- python train.py",
            "idle": f"run {CUDA} --name {self.name} -- sleep 86400",
            "fail": f"run {CUDA} --name {self.name} -- false",
            "succeed": f"run {CUDA} --name {self.name} -- sleep 60",
            "bad-image": f"run {BAD_IMAGE} --name {self.name} --hours 0.05 -- python train.py",
        }
        return commands[self.kind]


def plan(config: SoakConfig) -> list[Planned]:
    """The seeded stream: who asks for what, where, when, and how it will end."""
    rng = random.Random(config.seed)
    kinds, weights = list(KINDS), list(KINDS.values())
    planned = []
    for index in range(config.workloads):
        kind = rng.choices(kinds, weights)[0]
        planned.append(
            Planned(
                name=f"soak-{index:05d}",
                kind=kind,
                user=f"U_S{rng.randrange(config.users):03d}",
                channel=f"C_S{rng.randrange(config.channels):02d}",
                arrives=(index // config.batch) * config.gap,
                release_after=rng.uniform(60, 600) if kind == "release" else 0.0,
            )
        )
    return planned


@dataclass
class Figures:
    workloads: int = 0
    wall_seconds: float = 0.0
    sim_seconds: float = 0.0
    slack_calls: Counter[str] = field(default_factory=Counter)
    api_requests: int = 0
    pods_created: int = 0
    duplicate_pods: int = 0
    orphaned_pods: int = 0
    pool_nodes: int = 0
    threads: int = 0
    threads_open: int = 0
    endings: Counter[str] = field(default_factory=Counter)
    seen: Counter[str] = field(default_factory=Counter)
    """Thread replies that say how workloads ended, by what they say."""
    repeated: int = 0
    """Threads where one of those was said more than once: each must happen once."""
    unsaid: list[str] = field(default_factory=list)
    """Workloads whose thread lacks a reply its planned ending must bring, as `name: missing words`."""
    max_live: int = 0

    def lines(self) -> list[str]:
        rate = self.workloads / self.wall_seconds if self.wall_seconds else 0.0
        calls = ", ".join(f"{m} {n}" for m, n in self.slack_calls.most_common())
        rows = [
            ("workloads", f"{self.workloads} ({rate:.1f} per wall second; {self.max_live} alive at most)"),
            ("wall time", f"{self.wall_seconds:.0f} s for {self.sim_seconds / 3600:.1f} h of cluster time"),
            ("Slack Web API calls", f"{sum(self.slack_calls.values())} ({calls})"),
            ("Kubernetes API calls", f"{self.api_requests} (by the bot)"),
            ("pods created", f"{self.pods_created} (duplicates: {self.duplicate_pods})"),
            ("orphaned GPU pods", str(self.orphaned_pods)),
            ("GPU pool nodes", str(self.pool_nodes)),
            ("threads", f"{self.threads} (open: {self.threads_open})"),
            ("planned endings", str(dict(self.endings))),
            ("said in threads", str(dict(self.seen))),
            ("said twice in a thread", str(self.repeated)),
            ("ending left unsaid", f"{len(self.unsaid)} {self.unsaid[:5] if self.unsaid else ''}".strip()),
        ]
        return [f"{label:<22}{value}" for label, value in rows]

    @property
    def clean(self) -> bool:
        return (
            self.pods_created == self.workloads
            and not self.duplicate_pods
            and not self.orphaned_pods
            and not self.pool_nodes
            and self.threads == self.workloads
            and not self.threads_open
            and not self.repeated
            and not self.unsaid
        )


class Soak:
    """The sim, the emulator, a Redis and the bot, in this process; `run` plays the plan and counts."""

    def __init__(
        self, config: SoakConfig, sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
    ):
        self.config, self.sim, self.slack, self.bot = config, sim, slack, bot
        self.pods = ledger.pod_ledger(sim)
        self.figures = Figures(workloads=config.workloads)
        self.steps = 0
        self.reported = 0

    # -- playing -----------------------------------------------------------------------------
    def run(self) -> Figures:
        started = time.monotonic()
        start = self.sim.world.clock.now()
        planned = plan(self.config)
        releases = sorted(
            (p.arrives + p.release_after, p.name, p.user, p.channel) for p in planned if p.release_after
        )
        arrivals = sorted(planned, key=lambda p: p.arrives)
        end = arrivals[-1].arrives + self.config.tail if arrivals else 0.0
        while True:
            now = self.sim.world.clock.now() - start
            due, arrivals = (
                [p for p in arrivals if p.arrives <= now],
                [p for p in arrivals if p.arrives > now],
            )
            self._type([(p.user, p.channel, p.text) for p in due])
            going = [r for r in releases if r[0] <= now]
            releases = releases[len(going) :]
            self._type([(user, channel, f"release {name}") for _, name, user, channel in going])
            self._wait_until_caught_up()
            self.bot.reap()  # one reaper round per step, driven here rather than by a real-time timer
            self.steps += 1
            if self.steps % TICK_EVERY == 0:
                self.bot.tick()
            self._wait_until_caught_up()
            self.figures.max_live = max(self.figures.max_live, len(self.pods.live))
            self._progress(started)
            if not arrivals and not releases and self._all_over():
                break
            if now > end:
                break
            self.sim.advance(self.config.stride, step=1)
        self._settle()
        self.figures.wall_seconds = time.monotonic() - started
        self.figures.sim_seconds = self.sim.world.clock.now() - start
        return self._count(planned)

    def _progress(self, started: float) -> None:
        """A line on stderr per thousand pods created, so a long soak shows its pace as it goes."""
        thousands = len(self.pods.created) // 1000
        if thousands > self.reported:
            self.reported = thousands
            elapsed = time.monotonic() - started
            print(f"{thousands * 1000} pods created, {elapsed:.0f} s", file=sys.stderr, flush=True)

    def _type(self, commands: list[tuple[str, str, str]]) -> None:
        """Users type their commands at once, as a busy channel does; every one must be acked."""
        if not commands:
            return
        users = self.slack.emulator.users

        async def everyone() -> list[Any]:
            return await asyncio.gather(*(users.type_command(u, c, "/gpu", t) for u, c, t in commands))

        deliveries = self.slack.call(everyone, timeout=120)
        refused = [d for d in deliveries if not d.acked]
        if refused:
            raise AssertionError(f"{len(refused)} commands not acked, e.g. {refused[0]}")

    def _wait_until_caught_up(self) -> None:
        """Until the tracker holds every gpubot pod as the sim does, the node informer every node, and the
        outbox has sent everything: the bot has heard and said all there is so far."""
        deadline = time.monotonic() + STEP_WAIT
        while not self._caught_up():
            if time.monotonic() > deadline:
                raise AssertionError("the bot did not keep up with one clock step")
            time.sleep(0.005)

    def _caught_up(self) -> bool:
        pods = self.sim.run(
            lambda: {(p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in self._gpubot_pods()}
        )
        seen = {
            (t.workload.name, t.workload.resource_version)
            for t in self.bot.services.tracker.threads().values()
        }
        if pods != seen or self.bot.outbox.depth():
            return False
        nodes = self.sim.run(
            lambda: {
                (n["metadata"]["name"], n["metadata"]["resourceVersion"])
                for n in self.sim.world.store.iter_raw("nodes")
            }
        )
        informer = next(i for i in self.bot.cluster.informers if i.source.kind == "Node")
        return nodes == {
            (o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in list(informer.cache.values())
        }

    def _gpubot_pods(self) -> list[ledger.Json]:
        return [
            p
            for p in self.sim.world.store.iter_raw("pods")
            if (p["metadata"].get("labels") or {}).get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
        ]

    def _all_over(self) -> bool:
        return (
            len(self.pods.created) >= self.config.workloads and not self.pods.live and not self._pool_nodes()
        )

    def _pool_nodes(self) -> int:
        return self.sim.run(lambda: len(self.sim.world.node_ctl.nodes_of(POOL)))

    def _settle(self) -> None:
        """Let the last edits and replies go out (the drained-pool replies come at the very end)."""
        self.bot.outbox.flush(timeout=120)
        with contextlib.suppress(TimeoutError):
            self.slack.wait_until(lambda: not self._open_threads(), timeout=10)

    # -- counting ----------------------------------------------------------------------------
    def _roots(self) -> list[ledger.Json]:
        def read() -> list[ledger.Json]:
            found = []
            for message in self.slack.emulator.workspace.messages.values():
                if message.bot_id and not message.thread_ts and message.channel.startswith("C_S"):
                    found.append({"text": message.text, "blocks": message.blocks})
            return found

        return self.slack.run(read)

    def _open_threads(self) -> list[ledger.Json]:
        return [root for root in self._roots() if not ledger.is_closed(root)]

    def _count(self, planned: list[Planned]) -> Figures:
        figures = self.figures
        figures.slack_calls = Counter(c.method for c in self.slack.calls())
        pools = self.bot.cluster.api.rest_client.pool_manager.pools
        figures.api_requests = sum(pools[key].num_requests for key in list(pools.keys()))
        figures.pods_created = len(self.pods.created)
        figures.duplicate_pods = len(self.pods.threads_with_two_pods())
        figures.orphaned_pods = len(self.pods.live)
        figures.pool_nodes = self._pool_nodes()
        figures.threads = len(self._roots())
        figures.threads_open = len(self._open_threads())
        figures.endings = Counter(p.kind for p in planned)
        figures.seen, figures.repeated, said_in = self._said()
        for p in planned:
            ts = self.pods.created.get(p.name, "")
            said = said_in.get(ts, set())
            missing = min((needed - said for needed in ENDED_BY[p.kind]), key=len)
            if missing:
                figures.unsaid.append(f"{p.name} ({p.kind}): {', '.join(sorted(missing))}")
                if len(figures.unsaid) <= 3:  # what the thread did say, to see which way it went
                    print(f"{p.name}'s thread: {self._thread_said(ts)}", file=sys.stderr, flush=True)
        return figures

    def _thread_said(self, ts: str) -> list[str]:
        def read() -> list[str]:
            found = [m for m in self.slack.emulator.workspace.messages.values() if ts and m.thread_ts == ts]
            return [m.text[:120] for m in found]

        return self.slack.run(read)

    def _said(self) -> tuple[Counter[str], int, dict[str, set[str]]]:
        """How often each act was said, in how many threads one was said twice, and what each thread
        (by its root's ts) said."""

        def read() -> list[tuple[str, str, str]]:
            return [
                (f"{m.channel}/{m.thread_ts or m.ts}", m.thread_ts or m.ts, m.text)
                for m in self.slack.emulator.workspace.messages.values()
                if m.bot_id and m.channel.startswith("C_S")
            ]

        total: Counter[str] = Counter()
        per_thread: Counter[tuple[str, str]] = Counter()
        said_in: dict[str, set[str]] = {}
        for thread, ts, text in self.slack.run(read):
            for what, words in SAID.items():
                if text.startswith(words) or words in text[:80]:
                    total[what] += 1
                    per_thread[(thread, what)] += 1
                    said_in.setdefault(ts, set()).add(what)
        return total, sum(1 for count in per_thread.values() if count > 1), said_in


# -- the environment -------------------------------------------------------------------------------


def slack_config(config: SoakConfig) -> SlackConfig:
    users = tuple(User(f"U_S{i:03d}", f"user{i:03d}") for i in range(config.users))
    channels = (*((f"C_S{i:02d}", f"gpu-{i:02d}") for i in range(config.channels)), (OPS, "gpu-ops"))
    return SlackConfig(
        users=DEFAULT_USERS + users, channels=channels, rate_limits=RateLimitConfig(enabled=False)
    )


def bot_settings(stage: stages.Stage) -> settings.Settings:
    """The demo's bot, with a quota no soak user reaches, a quick idle rule and one replica."""
    return dataclasses.replace(
        stages.bot_settings(stage, scale_channel=OPS),
        quota=settings.QuotaSettings(max_gpus_per_user=1024),
        reaper=settings.ReaperSettings(
            prometheus_url=stage.sim.url,
            idle_window_minutes=2.0,
            idle_grace_minutes=2.0,
            finished_retention_minutes=2.0,
        ),
        leader=settings.LeaderSettings(enabled=False),
        log_level="WARNING",
    )


@contextlib.contextmanager
def environment(config: SoakConfig) -> Iterator[Soak]:
    """The harness's stage, with a Redis the soak may stop, and the bot on the sim's clock; the soak runs
    its reaper rounds and timer ticks itself, once per step."""
    with (
        tempfile.TemporaryDirectory(prefix="gpubot-soak-") as tmp,
        processes.redis_server(Path(tmp)) as redis_server,
        stages.stage(
            slack_config=slack_config(config), redis_url=redis_server.url, prefix="gpubot-soak-"
        ) as stage,
    ):
        sim = stage.sim
        sim.run(
            lambda: sim.world.registry.set_autoscaling(
                POOL, enabled=True, min_size=0, max_size=config.max_nodes
            )
        )
        with runner.running_bot(
            bot_settings(stage),
            stage.slack,
            reaper_timer=False,
            wait=30,
            clock=sim.world.clock.datetime,
            outbox_settings=UNLIMITED,
            tick_seconds=NEVER,
        ) as bot:
            yield Soak(config, sim, stage.slack, bot)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.restarts.soak", description=__doc__.split("\n")[0])
    defaults = SoakConfig()
    for name in ("workloads", "seed", "batch", "max_nodes", "users", "channels"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    parser.add_argument("--gap", type=float, default=defaults.gap)
    args = parser.parse_args(argv)
    config = dataclasses.replace(defaults, **{k: v for k, v in vars(args).items()})
    with environment(config) as soak:
        figures = soak.run()
    for line in figures.lines():
        print(line, flush=True)
    print("clean" if figures.clean else "NOT CLEAN", flush=True)
    return 0 if figures.clean else 1


if __name__ == "__main__":
    sys.exit(main())
