"""`gpubot demo`: the real bot on the embedded cluster and Slack emulator, playing the story users live.

Part of the CLI family, so (like `bot.cli`) it may start both the product and the simulator. The sim runs
a manual clock the story moves in small steps, running a reaper round and waiting for the bot to answer
after each, so the episode is the same every run and an hour of simulated time takes seconds.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from bot import runtime
from bot.adapters import store
from bot.services import reaper
from bot.testing import runner, stages
from sim.cluster import world
from sim.slack import render
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import Json

WALL_STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")
"""The emulator stamps messages with wall time; the live transcript shows the sim's time instead."""

CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
RUN = f"run {CUDA} -- sleep 3600"
BOB_RUN = f"run {CUDA} --hours 1 -- sleep 86400"
CRASH_RUN = (
    f'run {CUDA} --name data-check -- sh -c "echo loading /data/train; '
    "echo 'FileNotFoundError: /data/train/part-3.parquet' >&2; exit 1\""
)
"""A one-hour lease on a job that only sleeps: the reaper's reminder and idleness both come up."""
NOTEBOOK_RUN = "run --type notebook --name explore --hours 1"
USERS_CHANNEL, OPS_CHANNEL = "C_GPU", "C_OPS"
POOL = "gpu-pool"
NAMES = {"U_ALICE": "alice", "U_BOB": "bob", "U_ADMIN": "admin"}
BOT_WAIT = 10.0
"""Real seconds to wait for the bot to answer something it must answer; reached only when broken."""
QUIET = 0.15
"""Real seconds without a sought change after a clock step before the story moves the clock again."""
STORY_TICKS_ONLY = 10**6
"""The bot's own tick timer, in real seconds: never, as the story ticks once per clock step."""


class LiveTranscript:
    """Prints each message and ephemeral once when it appears, and its latest revision whenever it changes."""

    def __init__(self, sim: world.BackgroundWorld, slack: BackgroundSlack, out: TextIO) -> None:
        self.sim, self.slack, self.out = sim, slack, out
        self.shown: dict[tuple[str, ...], list[str]] = {}

    def say(self, text: str) -> None:
        print(f"{self.stamp()} ** {text}", file=self.out, flush=True)

    def stamp(self) -> str:
        seconds = int(self.sim.world.clock.now())
        return f"[sim +{seconds // 60:02d}:{seconds % 60:02d}]"

    def refresh(self) -> None:
        """Print what is new or changed since the last refresh (users' own typing is narrated by `say`)."""
        snapshot = self.slack.transcript()
        names = {user["id"]: user["name"] for user in snapshot.get("users", [])}
        for channel in snapshot.get("channels", []):
            where = "#" + str(channel["name"])
            owners = {
                m["ts"]: owner_of(m, names) for m in channel.get("messages", []) if not m.get("thread_ts")
            }
            for message in channel.get("messages", []):
                owner = owners.get(message.get("thread_ts", ""))
                place = f"{where} ↳ {owner} thread" if owner is not None else where
                lines = render_one(snapshot, channel, messages=[message])
                self._show(("message", channel["id"], message["ts"]), place, lines)
            for ephemeral in snapshot.get("ephemerals", []):
                if ephemeral["channel"] == channel["id"]:
                    lines = render_one(snapshot, channel, ephemerals=[ephemeral])
                    self._show(("ephemeral", ephemeral["message_ts"], str(ephemeral["user"])), where, lines)

    def _show(self, key: tuple[str, ...], place: str, lines: list[str]) -> None:
        if not lines or self.shown.get(key) == lines:
            return
        marker = "edited" if key in self.shown else "new"
        self.shown[key] = lines
        print(f"{self.stamp()} {place} ({marker}) {lines[0]}", file=self.out, flush=True)
        for line in lines[1:]:
            print(f"{' ' * 16}{line}", file=self.out, flush=True)


def owner_of(root: Json, names: dict[str, str]) -> str:
    """Whose workload a thread follows, from the first user the root message mentions."""
    mention = re.search(r"<@(U\w+)>", f"{root.get('text', '')} {root.get('blocks') or ''}")
    return f"{names.get(mention[1], mention[1])}'s" if mention else "the"


def render_one(
    snapshot: Json, channel: Json, *, messages: list[Json] | None = None, ephemerals: list[Json] | None = None
) -> list[str]:
    """One message or ephemeral as the emulator's renderer shows it, minus the channel title and wall time."""
    alone = {
        "users": snapshot.get("users", []),
        "channels": [{**channel, "messages": messages or []}],
        "ephemerals": ephemerals or [],
        "actions": [],
    }
    lines = [line.strip() for line in render.render_text(alone).splitlines()[1:] if line.strip()]
    return [WALL_STAMP.sub("", line).replace(" (edited)", "") for line in lines[:1]] + lines[1:]


class Story:
    """The moves of the story: users typing, the clock moving, and waits for what the bot should say."""

    def __init__(
        self, sim: world.BackgroundWorld, slack: BackgroundSlack, live: LiveTranscript, bot: runtime.Bot
    ) -> None:
        self.sim, self.slack, self.live, self.bot = sim, slack, live, bot

    def type(self, user: str, text: str) -> None:
        self.live.say(f"{NAMES[user]} types `/gpu {text}` in #gpu-users")
        self.slack.type_command(user, USERS_CHANNEL, "/gpu", text)
        self.live.refresh()

    def expect(self, done: Callable[[], Any]) -> Any:
        """Wait (real time, clock still) for something the bot answers straight away."""
        found = self.slack.wait_until(done, timeout=BOT_WAIT)
        self.live.refresh()
        return found

    def advance_until(self, done: Callable[[], Any], *, step: float = 5, limit: float = 1800) -> Any:
        """Move the sim clock `step` seconds at a time until `done()` holds, letting the bot catch up."""
        moved = 0.0
        while moved <= limit:
            with contextlib.suppress(TimeoutError):
                found = self.slack.wait_until(done, timeout=QUIET)
                self.live.refresh()
                return found
            self.live.refresh()
            self.step_clock(step)
            moved += step
        raise RuntimeError(f"the story stalled: not reached within {limit:g} simulated seconds")

    def step_clock(self, seconds: float) -> list[reaper.Done]:
        """Move the sim clock, then run the reaper round and the tick the bot's timers would have run."""
        self.sim.advance(seconds, step=1)
        done = self.bot.reap()
        self.bot.tick()
        self.bot.outbox.flush(timeout=BOT_WAIT)  # what the bot queued shows at the time it happened
        return done

    def click(self, user: str, words: str, action_id: str) -> None:
        """`user` presses a button on the newest message in their thread that says `words`."""
        root = self.thread_of(user)
        assert root is not None, f"{NAMES[user]} has no thread"
        message = next(
            m
            for m in reversed(self.slack.messages(USERS_CHANNEL))
            if m["thread_ts"] == root["ts"] and words in m["text"]
        )
        label = action_id.removeprefix("gpubot_").capitalize()
        self.live.say(f"{NAMES[user]} presses [{label}] on the bot's message")
        self.slack.click_button(user, USERS_CHANNEL, message["ts"], action_id)

    # -- reading the transcript ---------------------------------------------------------------
    def roots(self, channel: str = USERS_CHANNEL) -> list[Json]:
        return [m for m in self.slack.messages(channel) if not m["thread_ts"] and m["bot_id"]]

    def thread_of(self, user: str) -> Json | None:
        """The user's newest thread."""
        mine = (
            m
            for m in reversed(self.roots())
            if f"<@{user}>" in m["text"]
            or user in str(m["blocks"])
            or m["text"].startswith(f"{NAMES[user]} asked for")  # the root before its first news
        )
        return next(mine, None)

    def replies(self, root: Json) -> list[str]:
        return [m["text"] for m in self.slack.messages(root["channel"]) if m["thread_ts"] == root["ts"]]

    def headline(self, user: str, words: str) -> Callable[[], bool]:
        return self.newest_thread(user, lambda root: words in root["text"])

    def shows(self, user: str, words: str) -> Callable[[], bool]:
        """Anywhere in the user's newest thread root, its sections included."""
        return self.newest_thread(user, lambda root: words in str(root["blocks"]))

    def replied(self, user: str, words: str) -> Callable[[], bool]:
        return self.newest_thread(user, lambda root: any(words in text for text in self.replies(root)))

    def newest_thread(self, user: str, holds: Callable[[Json], bool]) -> Callable[[], bool]:
        """Whether the user has a thread and its newest root `holds`, looked up afresh at each call."""

        def check() -> bool:
            root = self.thread_of(user)
            return root is not None and holds(root)

        return check

    def ephemeral(self, user: str, words: str) -> Callable[[], bool]:
        return lambda: any(words in e["text"] for e in self.slack.ephemerals(user))

    def ops_says(self, words: str) -> Callable[[], bool]:
        return lambda: any(words in m["text"] for m in self.roots(OPS_CHANNEL))

    def pool_size(self) -> int:
        return self.sim.run(lambda: self.sim.world.registry.get(POOL).target_size)


def play(story: Story) -> None:
    """Issue 3 §9: alice runs, the thread walks the steps, status, bob at max size, release, drain to 0."""
    say = story.live.say
    say(f"the GPU pool may grow to 1 node for this story, so bob will find it full ({POOL} max 1)")
    story.sim.run(
        lambda: story.sim.world.registry.set_autoscaling(POOL, enabled=True, min_size=0, max_size=1)
    )

    story.type("U_ALICE", RUN)
    story.expect(lambda: story.thread_of("U_ALICE"))
    for words in ("scaling up", "to come up with its GPU", "Running on"):
        story.advance_until(story.headline("U_ALICE", words))
    story.expect(story.replied("U_ALICE", "Running"))

    story.type("U_ALICE", "status")
    story.expect(story.ephemeral("U_ALICE", "Your workloads"))

    story.type("U_BOB", BOB_RUN)
    story.expect(lambda: story.thread_of("U_BOB"))
    story.advance_until(story.replied("U_BOB", "maximum size"))
    say("bob's pod waits: the pool is at its maximum, and his thread says why and what he can do")

    story.type("U_ALICE", "release all")
    story.expect(story.ephemeral("U_ALICE", "Released"))
    story.advance_until(story.headline("U_ALICE", "Released"))
    say("alice's GPU is free, so bob's pending pod gets her node")
    story.advance_until(story.headline("U_BOB", "Running"))

    say("bob's job only sleeps, so the GPU metric shows it idle; after 45 minutes the reaper warns him")
    story.advance_until(story.replied("U_BOB", "idle for"), step=30, limit=2 * 3600)
    story.click("U_BOB", "idle for", "gpubot_keep")
    story.expect(story.replied("U_BOB", "Kept by its owner"))
    say("bob asked for a one-hour lease; before it ends the reaper reminds him, in his thread and by DM")
    story.advance_until(story.replied("U_BOB", "The lease on"), step=30, limit=3600)
    say("bob does not answer the reminder, nor the last nudge; after the grace period the reaper deletes it")
    story.advance_until(story.replied("U_BOB", "nobody extended it"), step=30, limit=3600)
    say("before the idle node goes, alice runs a data check; it crashes, and her thread shows why")
    story.type("U_ALICE", CRASH_RUN)
    story.advance_until(story.replied("U_ALICE", "Failed"))
    story.type("U_ALICE", "logs")
    story.expect(story.ephemeral("U_ALICE", "lines of `data-check`"))
    say("alice opens a notebook to look at the data; her thread shows how to reach it, token included")
    story.type("U_ALICE", NOTEBOOK_RUN)
    story.advance_until(story.shows("U_ALICE", "lab?token="))
    story.type("U_ALICE", "release explore")
    story.advance_until(story.headline("U_ALICE", "Released"))
    say("nothing holds a GPU now; the autoscaler removes the idle node after its scale-down delay")
    story.advance_until(lambda: story.pool_size() == 0 and story.ops_says("back at 0"), step=15, limit=3600)
    say(f"{POOL} is back at 0 nodes; the #gpu-ops message closes the episode")


def play_story(out: TextIO) -> int:
    """Start the sim, the Slack emulator and the bot in-process, play the story, and stop them all."""
    with demo_environment(out) as story:
        play(story)
    return 0


@contextlib.contextmanager
def demo_environment(out: TextIO, *, clock_note: str = "the clock moves with the story") -> Iterator[Story]:
    """The sim, the Slack emulator and the real bot, in-process; every demo mode plays on this one setup."""
    with stages.stage(prefix="gpubot-demo-", memory_fallback=True) as stage:
        sim, slack = stage.sim, stage.slack
        live = LiveTranscript(sim, slack, out)
        live.say(f"embedded cluster at {sim.url}, Slack emulator at {slack.url}; {clock_note}")
        if stage.redis_url == store.MEMORY_URL:
            live.say("redis-server is not installed, so the bot keeps its Redis state in this process")
        else:
            live.say(f"a private Redis at {stage.redis_url}")
        config = stages.bot_settings(stage, scale_channel=OPS_CHANNEL, metrics=True)
        # The bot's clock is the sim's, so times agree. Its timers count real seconds, which mean nothing
        # on a clock the story moves: the story runs a reaper round and a tick after each clock step
        # (`Story.step_clock`), as the reaper tests and the soak do. A real-time tick measured the wait to
        # drain from a tick many simulated minutes old; a reaper timer fast enough to keep up fired while
        # the last round still waited for Slack, and APScheduler logged each skipped round.
        with runner.running_bot(
            config,
            slack,
            reaper_timer=False,
            wait=BOT_WAIT,
            clock=sim.world.clock.datetime,
            tick_seconds=STORY_TICKS_ONLY,
        ) as bot:
            yield Story(sim, slack, live, bot)
        live.refresh()
