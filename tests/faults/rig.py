"""What the fault tests share: a fresh sim, Slack emulator and bot per run, faults switched over HTTP.

Each run starts from nothing (its own sim and emulator, Redis flushed), so a faulted run and its no-fault
baseline tell the same story. The bot gets short client timeouts and back-offs, so a request the sim holds
costs a fraction of a second; faults are seeded, and periodic watch faults follow the sim's clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import redis

from bot import runtime
from bot.adapters import kube, kube_retry, slack_outbox
from bot.testing import stages
from sim.cluster import world
from sim.cluster.store import Change
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import FaultConfig, RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig
from tests.integration.botkit import WAIT, Json, running_bot, timeline

EXTRA_RUNS = int(os.environ.get("GPUBOT_FAULT_RUNS", "0"))
"""The slower variant: GPUBOT_FAULT_RUNS=N tells each faulted story N more times, at seeded random
faults (N seeds), or for the watch faults with N more drop periods; `make test` runs none of them."""
TICK_SECONDS = 3600.0
"""The bot's timer round (slow-node check, resuming runs a crash cut short) stays out of these stories:
a round that meets a run still being carried out takes it up a second time (a second thread root)."""
HOLD_SECONDS = 1.0
"""How long the sim holds a request it times out: well past the bot's read timeout below."""
QUICK_REQUESTS = kube_retry.RequestSettings(
    connect_timeout_seconds=2.0,
    read_timeout_seconds=0.3,
    backoff_initial_seconds=0.02,
    backoff_max_seconds=0.2,
)
QUICK_INFORMERS = kube.InformerSettings(
    list_timeout_seconds=0.3, backoff_initial_seconds=0.05, backoff_max_seconds=0.5
)
QUICK_OUTBOX = slack_outbox.OutboxSettings(
    channel_messages_per_second=50.0,
    channel_message_burst=10,
    method_per_minute={method: 3000 for method in slack_outbox.TIER_PER_MINUTE},
    backoff_initial_seconds=0.05,
    backoff_max_seconds=0.5,
    default_retry_after_seconds=0.05,
)
"""Slack's pacing lifted (the emulator's own limits are off, and a paced thread would trail the sim by
seconds), retries sooner (injected 429s carry `Retry-After: 0`); what is retried, and in which order,
is the product's own."""


@dataclass
class Rig:
    sim: world.BackgroundWorld
    slack: BackgroundSlack
    bot: runtime.Bot
    news: ChangeCounter

    def set_api_faults(self, **fields: Any) -> Json:
        """`POST /simctl/v1/faults/api`, as a `gpubot sim` user would switch them."""
        return post_json(self.sim.url + "/simctl/v1/faults/api", fields)

    def api_faults(self) -> Json:
        with urllib.request.urlopen(self.sim.url + "/simctl/v1/faults/api", timeout=WAIT) as answer:
            found: Json = json.loads(answer.read())
        return found

    def set_slack_faults(self, **fields: Any) -> Json:
        """`POST /emulator/v1/faults` on the Slack emulator."""
        return post_json(self.slack.url + "/emulator/v1/faults", fields)

    def relists(self) -> int:
        return sum(informer.relists for informer in self.bot.cluster.informers)


@dataclass
class ChangeCounter:
    """Changes to what the bot watches, counted on the sim's commit path (history may be compacted)."""

    namespace: str = "default"
    seen: int = 0

    def record(self, change: Change) -> None:
        ours = change.obj["metadata"].get("namespace") == self.namespace
        if change.resource == "nodes" or (change.resource in ("pods", "events") and ours):
            self.seen += 1


def post_json(url: str, body: Json) -> Json:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        found: Json = json.loads(answer.read())
    return found


@contextlib.contextmanager
def rig(redis_url: str) -> Iterator[Rig]:
    """A fresh world, emulator and bot, no faults yet: Bolt's own start-up calls must succeed."""
    with redis.Redis.from_url(redis_url) as connection:
        connection.flushdb()  # scale-up history from an earlier run would change this run's ETAs
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False),
        socket_mode=SocketModeConfig(ack_timeout=3.0),
        faults=FaultConfig(),
    )
    with stages.stage(slack_config=config, redis_url=redis_url, prefix="gpubot-faults-") as stage:
        settings = stages.bot_settings(stage, namespace="default")
        cluster = kube.KubeCluster.from_kubeconfig(
            settings.cluster.kubeconfig,
            namespace=settings.cluster.namespace,
            informer_settings=QUICK_INFORMERS,
            request_settings=QUICK_REQUESTS,
        )
        news = ChangeCounter()
        stage.on_commit(news.record)
        with running_bot(
            settings, stage.slack, cluster=cluster, tick_seconds=TICK_SECONDS, outbox_settings=QUICK_OUTBOX
        ) as bot:
            yield Rig(stage.sim, stage.slack, bot, news)


# -- moving the story on --------------------------------------------------------------------------------


def open_watches(sim: world.BackgroundWorld) -> int:
    return sim.run(sim.world.api.faults.open_watches)


def wait_for_watches(sim: world.BackgroundWorld, count: int) -> None:
    """Until the bot has every watch open again (after a drop or a 410), so each fault meets all of them."""
    deadline = time.monotonic() + WAIT
    while open_watches(sim) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the bot did not reopen its {count} watches within {WAIT} s")
        time.sleep(0.01)


def advance_watching(rig: Rig, done: Callable[[], Any], *, limit: float = 900, stride: float = 5) -> Any:
    """`botkit.advance_until`, but each stride starts with the bot's watches open, so a periodic watch
    fault always ends live watches rather than falling between a drop and the reconnect."""
    sim, slack = rig.sim, rig.slack
    watches = len(rig.bot.cluster.informers)
    moved, changed = 0.0, True
    while moved <= limit:
        if changed:
            with contextlib.suppress(TimeoutError):
                return slack.wait_until(done, timeout=0.3)
        elif result := done():
            return result
        wait_for_watches(sim, watches)
        before = rig.news.seen
        sim.advance(stride, step=1)
        changed = sim.run(lambda: rig.news.seen) > before
        moved += stride
    with contextlib.suppress(TimeoutError):  # the bot may lag behind a quick run of quiet steps
        return slack.wait_until(done, timeout=WAIT)
    shown = [m["text"] for m in slack.messages("C_GPU")]
    raise AssertionError(f"not reached within {limit} simulated seconds; channel shows {shown}")


# -- reading the story back -----------------------------------------------------------------------------

NODE = re.compile(r"gke-demo-[a-z0-9-]+?-[0-9a-f]{8}-[0-9a-z]{4}")
POD = re.compile(r"gpu-u-[a-z0-9]+-[0-9a-f]{6}")
DURATION = re.compile(r"\b(\d+h)?(\d+m)?\d+s\b")
NUMBER = re.compile(r"\d+(\.\d+)?")


def plain(text: str) -> str:
    """A message with what differs between two runs of one story taken out: random node and pod names,
    durations and amounts (the sim's node names are random; timing is not what these tests judge)."""
    return NUMBER.sub("#", DURATION.sub("T", POD.sub("POD", NODE.sub("NODE", text))))


def steps(root: Json) -> list[str]:
    """The root's timeline after the request, one entry per stage passed, without how long it took."""
    return [plain(fact.split(" +")[0]) for fact in timeline(root)[1:]]
