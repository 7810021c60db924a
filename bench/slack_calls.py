"""P5: Slack Web API calls per workload, and 429s left unhandled, with the emulator's rate limits on.

One lifecycle first: a user types `/gpu run`, the pool scales from zero, the pod runs, the user releases
it, and the pool drains to zero. Every Web API call the emulator receives for that workload (its thread,
its ephemerals and DMs) is counted; the scale channel's episode message is counted apart, being one per
episode, not per workload. Baseline: a naive bridge that posts one message per watch event about the
workload (its pod's changes and the events naming it), counted from the sim's commit log.

Then many workloads at once: as many users type `/gpu run` together, and the bench waits for every root
to say Running and the bot's outbox to drain. Each 429 the emulator answered is matched to a later
success of the same call (same message, or same post); one without is unhandled. Baseline: the same
calls, replayed straight through slack_sdk's WebClient (no outbox) against full buckets.

    .venv/bin/python -m bench.slack_calls [--quick]
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bench import figures, rig, workloads
from bench.figures import Figure, Goal, Report
from bot.core import labels
from sim.cluster import world
from sim.cluster.store import Change
from sim.slack.emulator import Call, SlackConfig
from sim.slack.socket_mode import SocketModeConfig

RUN = f"run {workloads.CUDA} -- sleep 3600"
CALLS_GOAL = Goal("<=", 8, "calls")
UNHANDLED_GOAL = Goal("<=", 0, "")
STARTUP_METHODS = frozenset({"auth.test", "apps.connections.open", "api.test"})
CHANNELS = 10
SLACK_WAIT = 60.0
"""Real seconds for the bot to say what the cluster already shows (Slack's pace included); only if broken."""
DRAIN_CAP_SECONDS = 150.0
"""Real seconds the many-workloads part waits for the outbox to drain; Slack's pace sets how long it needs."""


class WatchEvents:
    """What a naive bridge would post: every change of a gpubot pod, and every event naming one."""

    def __init__(self) -> None:
        self.pods: set[str] = set()
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, change: Change) -> None:
        meta = change.obj.get("metadata", {})
        with self._lock:
            if change.resource == "pods" and meta.get("labels", {}).get(labels.MANAGED_BY_LABEL) == "gpubot":
                self.pods.add(meta["name"])
                self.count += 1
            elif change.resource == "events":
                involved = change.obj.get("involvedObject") or change.obj.get("regarding") or {}
                if involved.get("kind") == "Pod" and involved.get("name") in self.pods:
                    self.count += 1


def said(stage: rig.Stage, channel: str, words: str, *, roots: bool = False) -> bool:
    shown = rig.roots(stage, channel) if roots else stage.slack.messages(channel)
    return any(words in m["text"] for m in shown)


def running_roots(stage: rig.Stage, channels: list[str]) -> int:
    return sum(1 for c in channels for m in rig.roots(stage, c) if "Running" in m["text"])


def bot_calls(stage: rig.Stage, after: int) -> list[Call]:
    return [c for c in stage.slack.calls()[after:] if c.method not in STARTUP_METHODS]


def drained(bot: rig.BotProcess) -> Callable[[], bool]:
    return lambda: bot.metric("gpubot_slack_outbox_depth") == 0


def one_lifecycle() -> tuple[int, int, int, str]:
    """(calls for the workload, calls in the scale channel, naive bridge messages, the breakdown)."""
    config = SlackConfig(users=workloads.users(1), channels=workloads.channels(1))
    with rig.stage(world.WorldConfig(), config) as stage:
        events = WatchEvents()
        stage.on_commit(events)
        bot = rig.BotProcess(stage, GPUBOT_SCALE_CHANNEL="C_OPS")
        try:
            bot.start_and_wait(stage)
            start = len(stage.slack.calls())
            channel = workloads.channels(1)[0][0]
            delivery = stage.slack.type_command("U0001", channel, "/gpu", RUN)
            assert delivery.acked, delivery
            rig.advance_until(stage, lambda: [p for p in stage.sim.pods() if workloads.is_running(p)])
            stage.slack.wait_until(lambda: said(stage, channel, "Running", roots=True), timeout=SLACK_WAIT)
            stage.slack.type_command("U0001", channel, "/gpu", "release all")
            rig.advance_until(stage, lambda: not stage.sim.pods(), stride=5, limit=600)
            rig.advance_until(stage, lambda: not workloads.pool_nodes(stage.sim), stride=30, limit=3600)
            stage.slack.wait_until(
                lambda: said(stage, channel, "Released by", roots=True), timeout=SLACK_WAIT
            )
            stage.slack.wait_until(lambda: said(stage, "C_OPS", "back at 0"), timeout=SLACK_WAIT)
            rig.wait_for(drained(bot), timeout=SLACK_WAIT, what="the outbox draining", every=0.2)
            calls = bot_calls(stage, start)
        finally:
            bot.kill()  # measured by then: how it exits is no part of the figure
    scale = [c for c in calls if c.params.get("channel") == "C_OPS"]
    mine = [c for c in calls if c.params.get("channel") != "C_OPS"]
    kinds: dict[str, int] = {}
    for call in mine:
        kinds[call.method] = kinds.get(call.method, 0) + 1
    shown = ", ".join(f"{method} {n}" for method, n in sorted(kinds.items()))
    return len(mine), len(scale), events.count, shown


def call_key(call: Call) -> tuple[str, ...]:
    """What makes two calls the same write: an edit of one message, or one post of one text."""
    p = call.params
    if call.method == "chat.update":
        return (call.method, str(p.get("channel")), str(p.get("ts")))
    if call.method == "conversations.open":
        return (call.method, str(p.get("users")))
    return (
        call.method,
        str(p.get("channel")),
        str(p.get("thread_ts", "")),
        str(p.get("user", "")),
        str(p.get("text")),
    )


def unhandled_429s(calls: list[Call]) -> tuple[int, int]:
    """(429s received, 429s with no later success of the same call)."""
    limited = [(i, call_key(c)) for i, c in enumerate(calls) if c.status == 429]
    succeeded: dict[tuple[str, ...], int] = {}
    for i, call in enumerate(calls):
        if call.status == 200 and not call.error:
            succeeded[call_key(call)] = i
    return len(limited), sum(1 for i, key in limited if succeeded.get(key, -1) < i)


def replay(stage: rig.Stage, calls: list[Call]) -> int:
    """Send the same successful calls again straight through WebClient, as fast as it goes; count 429s."""
    stage.slack.set_rate_limits()  # full buckets, as the bot had at its start
    client = WebClient(token=stage.slack.bot_token, base_url=stage.slack.api_url)
    limited = 0
    for call in calls:
        if call.status != 200 or call.error:
            continue
        try:
            client.api_call(call.method, json=dict(call.params))
        except SlackApiError as err:
            limited += int(err.response.status_code == 429)
    return limited


def many_at_once(count: int) -> tuple[float, int, int, int, int, str]:
    """(calls per workload, 429s, unhandled 429s, naive 429s, calls still queued at the cap, note)."""
    users = workloads.users(count)
    names = [c for c, _ in workloads.channels(CHANNELS) if c != "C_OPS"]
    config = SlackConfig(
        users=users, channels=workloads.channels(CHANNELS), socket_mode=SocketModeConfig(ack_timeout=3.0)
    )
    with rig.stage(world.WorldConfig(gpu_pool=False), config) as stage:
        nodes = workloads.nodes_for(count, 8) + 1
        workloads.add_pool(stage.sim, workloads.gpu_pool(gpus_per_node=8, max_nodes=nodes))
        bot = rig.BotProcess(stage, GPUBOT_SCALE_CHANNEL="C_OPS")
        try:
            bot.start_and_wait(stage)
            start = len(stage.slack.calls())
            started = time.monotonic()

            async def everyone() -> None:
                typed = (
                    stage.slack.emulator.users.type_command(u.id, names[i % len(names)], "/gpu", RUN)
                    for i, u in enumerate(users)
                )
                await asyncio.gather(*typed)

            stage.slack.call(everyone, timeout=120)
            # Each pod follows its thread root, which Slack paces in real time: the clock waits for them.
            made = lambda: len(stage.sim.pods()) >= count  # noqa: E731
            rig.wait_for(made, timeout=DRAIN_CAP_SECONDS, what="every pod created", every=0.2)
            all_running = lambda: sum(workloads.is_running(p) for p in stage.sim.pods()) >= count  # noqa: E731
            rig.advance_until(stage, all_running, stride=10, limit=1800)
            all_said = lambda: running_roots(stage, names) >= count  # noqa: E731
            rig.wait_for(all_said, timeout=DRAIN_CAP_SECONDS, what="the roots saying Running", every=0.5)
            left = 0.0
            try:
                rig.wait_for(
                    drained(bot),
                    timeout=max(DRAIN_CAP_SECONDS - (time.monotonic() - started), 1),
                    what="drain",
                    every=0.5,
                )
            except TimeoutError:
                left = bot.metric("gpubot_slack_outbox_depth") or 0.0
            calls = bot_calls(stage, start)
            received, unhandled = unhandled_429s(calls)
            naive = replay(stage, calls)
        finally:
            bot.kill()  # measured by then: how it exits is no part of the figure
    mine = [c for c in calls if c.params.get("channel") != "C_OPS" and c.status == 200]
    took = time.monotonic() - started
    note = f"{len(mine)} successful calls for {count} workloads in {took:.0f} s"
    return len(mine) / count, received, unhandled, naive, int(left), note


def run(quick: bool) -> Report:
    count = 3 if quick else 100
    calls, scale, naive, breakdown = one_lifecycle()
    per_workload, received, unhandled, naive_429s, left, note = many_at_once(count)
    bridge, direct = "one message per watch event", "same calls without the outbox"
    shown = [
        Figure(
            "P5",
            "Slack calls per workload lifecycle (run → Running → release → drained)",
            float(calls),
            "calls",
            float(naive),
            bridge,
            CALLS_GOAL,
        ),
        Figure("P5", "scale-channel calls for that scale episode", float(scale), "calls"),
        Figure("P5", f"Slack calls per workload, {count} at once, up to Running", per_workload, "calls"),
        Figure(
            "P5", f"429s received, {count} workloads at once", float(received), "", float(naive_429s), direct
        ),
        Figure(
            "P5",
            f"429s left unhandled, {count} workloads at once",
            float(unhandled),
            "",
            float(naive_429s),
            direct,
            UNHANDLED_GOAL,
        ),
    ]
    notes = [
        f"One lifecycle, the emulator's rate limits on: {breakdown}.",
        f"{count} at once over {CHANNELS} channels: {note}"
        + (
            f"; {left} calls still queued (paced) when the bench stopped waiting"
            if left
            else "; outbox drained"
        )
        + ". A 429 is unhandled when no later success of the same call follows it.",
    ]
    return Report("P5", "Slack calls", shown, {}, notes)


def main() -> int:
    return figures.cli(run)


if __name__ == "__main__":
    raise SystemExit(main())
