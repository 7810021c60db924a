"""`gpubot serve` SIGKILLed with Slack writes queued in its outbox, or waiting for its pool to drain: after
the restart each write is sent once, and the wait goes on from where it was.

Slack refuses chat.postMessage, chat.update and chat.postEphemeral (503) while a workload reaches Running
and an admin releases it, so the thread's replies, the root's edits and the admin's ephemeral are queued;
Redis is read to see them kept there; then the bot is killed and started again with Slack back. Counted
in the emulator's transcript.
"""

from __future__ import annotations

import json
from typing import Any

import redis
from kubernetes import client

from bot import runtime
from bot.core import drain
from sim.cluster import world
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import RUN, advance_until, step_reached
from tests.integration.test_drain_reasons import POOL, notebook, pool_nodes, said_why
from tests.restarts import ledger, processes
from tests.restarts.conftest import BotFactory
from tests.restarts.test_bot_killed import assert_one_workload, terminating, the_root

SLACK_DOWN = FaultConfig(
    rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral"})
)


def queued(own_redis: processes.RedisServer, replica: str) -> list[dict[str, Any]]:
    """The writes the bot's outbox keeps in Redis, as kept."""
    with redis.Redis.from_url(own_redis.url) as connection:
        raw = connection.hgetall(f"gpubot:outbox:{replica}")
    return [json.loads(value) for value in raw.values()]


def queued_texts(own_redis: processes.RedisServer, replica: str, kind: str) -> list[str]:
    return [str(e["args"]["text"]) for e in queued(own_redis, replica) if e["kind"] == kind]


def test_replies_queued_at_a_kill_are_each_sent_once_after_the_restart(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory, own_redis: processes.RedisServer
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "to come up"))
    slack.set_faults(SLACK_DOWN)
    running = lambda: [p for p in sim.pods() if p["status"].get("phase") == "Running"]  # noqa: E731
    advance_until(sim, slack, running)
    (pod,) = running()
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", f"release {pod['metadata']['name']}")
    processes.wait(lambda: terminating(sim), what="the release's delete")
    replies = lambda: queued_texts(own_redis, "gpubot-0", "post")  # noqa: E731
    processes.wait(lambda: any("Released by" in t for t in replies()), what="the release's reply kept")
    processes.wait(lambda: queued_texts(own_redis, "gpubot-0", "ephemeral"), what="the admin's answer kept")
    at_the_kill = replies()
    assert any("Running" in t for t in at_the_kill), at_the_kill
    bot.kill()
    assert not ledger.replies(slack, the_root(slack)), "nothing was sent before the kill"
    slack.set_faults(FaultConfig())

    bot.start()
    advance_until(sim, slack, lambda: ledger.is_closed(the_root(slack)) and not pods.live)
    processes.wait(lambda: not queued(own_redis, "gpubot-0"), what="every kept write sent")
    sent = ledger.texts(ledger.replies(slack, the_root(slack)))
    for text in at_the_kill:
        assert sent.count(text) == 1, (text, sent)
    assert len(sent) == len(set(sent)), sent
    assert len([e for e in slack.ephemerals("U_ADMIN") if "Released" in e["text"]]) == 1
    assert "Released" in the_root(slack)["text"]
    assert_one_workload(pods, slack)


def test_a_pools_wait_to_drain_goes_on_across_a_restart(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bots: BotFactory,
    own_redis: processes.RedisServer,
    core: client.CoreV1Api,
) -> None:
    """gpubot's workload is released, a pod that may not be evicted keeps its GPU node up, and the bot is
    killed 10 simulated minutes into the 15-minute wait; started again 6 minutes later, it asks why the pool
    is not draining at once (the wait's start kept in Redis), not 15 minutes after its restart."""
    pods = ledger.pod_ledger(sim)
    bot = bots(GPUBOT_SCALE_CHANNEL="C_OPS")
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))
    (pod,) = sim.pods()
    node = str(pod["spec"]["nodeName"])
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    advance_until(sim, slack, lambda: not pods.live)
    core.create_namespaced_pod("default", notebook(node, {drain.SAFE_TO_EVICT: "false"}))
    wait_started = lambda: own_redis.keys(f"gpubot:drain-since:C_OPS:{POOL}")  # noqa: E731
    processes.wait(wait_started, timeout=2 * runtime.TICK_SECONDS, what="the wait kept")
    sim.advance(600)
    bot.kill()
    sim.advance(360)

    bot.start()
    why = processes.wait(
        said_why(slack, "default/notebook"), timeout=3 * runtime.TICK_SECONDS, what="the question"
    )
    assert [node] == pool_nodes(sim)
    assert "16m" in why or "17m" in why, (
        why
    )  # how long since gpubot's last workload left, not since the restart
