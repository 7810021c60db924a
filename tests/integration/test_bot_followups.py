"""The bot beyond the happy path, end to end: duplicate deliveries, ETAs from past scale-ups in Redis,
a node far later than usual, and a released workload's thread followed until its pool is at zero."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from pathlib import Path

import pytest
import redis

from bot import runtime
from bot.adapters import store
from bot.core import provisioning, usage
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    RUN,
    WAIT,
    advance_until,
    bot_settings,
    gpubot_pods,
    headline_is,
    replies,
    roots,
    run_and_wait_for_thread,
    running_bot,
    step_reached,
    the_root,
    wait_for_pods,
)

pytestmark = pytest.mark.usefixtures("slack_env")
POOL = "gpu-pool"
GKE_POOL_LABEL = "cloud.google.com/gke-nodepool"
TICK = 0.05
"""Real seconds between timer rounds, so a test never waits long for one."""


def facts(message: dict[str, object]) -> list[str]:
    """The root's facts line: the ETA while the node comes, the lease, and once over what it cost."""
    blocks = message.get("blocks") or []
    assert isinstance(blocks, list)
    found = next((b for b in blocks if b.get("block_id") == "gpubot_facts"), None)
    return [element["text"] for element in found["elements"]] if found else []


def note(message: dict[str, object]) -> str:
    return next((fact for fact in facts(message) if fact.startswith("Node likely ready")), "")


def remember_scale_ups(redis_url: str, seconds: list[float]) -> store.RedisStore:
    kept = store.RedisStore(redis.Redis.from_url(redis_url))
    for value in seconds:
        kept.add_sample(provisioning.series(POOL), value, keep=provisioning.HISTORY_KEEP)
    return kept


def test_a_redelivered_command_makes_one_thread_and_one_pod(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    first = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    wait_for_pods(sim, slack)
    again = slack.redeliver(first)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    slack.wait_until(
        lambda: any("Your workloads" in e["text"] for e in slack.ephemerals("U_ALICE")), timeout=WAIT
    )
    assert bot.outbox.flush(WAIT)
    assert again.acked and again.envelope_ids != first.envelope_ids
    assert len(roots(slack)) == 1 and len(gpubot_pods(sim)) == 1


def test_the_thread_shows_an_eta_from_past_scale_ups_and_records_its_own(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    kept = remember_scale_ups(redis_url, [100.0, 120.0, 140.0])
    with running_bot(bot_settings(sim, slack, tmp_path, redis_url), slack):
        run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, headline_is(slack, "scaling up"))
        eta = slack.wait_until(lambda: note(the_root(slack)), timeout=WAIT)
        advance_until(sim, slack, step_reached(slack, "Running"))
    assert eta.startswith("Node likely ready <!date^"), eta
    assert eta.endswith(": usually 2m00s after a scale-up here (the median of the last 3)."), eta
    assert note(the_root(slack)) == ""  # the node came; no ETA on a running workload
    newest, *older = kept.samples(provisioning.series(POOL))
    assert older == [140.0, 120.0, 100.0] and newest > 0


def test_a_node_far_later_than_usual_is_flagged_in_the_thread(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    remember_scale_ups(redis_url, [60.0, 60.0, 60.0])
    sim.run(lambda: sim.world.faults.never_register.add(POOL))
    config = bot_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack, clock=sim.world.clock.datetime, tick_seconds=TICK):
        root = run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, headline_is(slack, "scaling up"))
        early = replies(slack, root)
        sim.advance(7 * 60, step=30)
        said = slack.wait_until(
            lambda: [r for r in replies(slack, root) if "far longer than usual" in r], timeout=WAIT
        )
    assert not any("far longer" in r for r in early)
    (warning,) = said
    assert "usually 1m00s" in warning and "Fix:" in warning, warning


def test_a_released_thread_ends_with_what_the_run_cost_and_stays_quiet_as_its_pool_drains(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    """The owner left when they released it: the root says what it held and cost, the owner's spend adds
    it up, and the pool's drain later is the scale channel's news, not a notification in their thread."""
    config = bot_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack, clock=sim.world.clock.datetime) as bot:  # one clock, as in a real cluster
        root = run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, step_reached(slack, "Running"))
        said_running = slack.wait_until(lambda: replies(slack, root), timeout=WAIT)
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
        released_day = sim.world.clock.datetime().strftime("%Y-%m-%d")
        pool_nodes = lambda: [  # noqa: E731
            n for n in sim.nodes() if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == POOL
        ]
        advance_until(sim, slack, lambda: not pool_nodes(), limit=1800, stride=30)
        status_day = sim.world.clock.datetime().strftime("%Y-%m-%d")
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
        spend_line = lambda: [  # noqa: E731
            line
            for e in slack.ephemerals("U_ALICE")
            for line in e["text"].split("\n")
            if "runs today" in line
        ]
        (spend,) = slack.wait_until(spend_line, timeout=WAIT)
        assert bot.outbox.flush(WAIT)
    ended = the_root(slack)
    assert ended["text"].endswith("Released by its owner; its GPU is back in the pool"), ended["text"]
    (cost,) = [fact for fact in facts(ended) if "This run held its GPU for" in fact]
    assert re.search(r"GPU-hours, ≈ \$\d+\.\d\d\.$", cost), cost
    assert replies(slack, root) == said_running  # neither the release nor the drain notifies the owner
    spent = store.RedisStore(redis.Redis.from_url(redis_url), prefix="gpubot:")
    # The sim's clock starts at the wall clock, so a run near midnight UTC may end on the next day.
    kept = {day: usage.read_day(spent.amounts(f"spend:{day}") or {}) for day in {released_day, status_day}}
    spenders = {(s.user, s.channel) for day in kept.values() for s in day if s.dollars > 0}
    assert spenders == {("U_ALICE", "C_GPU")}
    today = sum(s.dollars for s in kept[status_day])
    assert spend == f"Your finished runs today (UTC): ${today:,.2f}"


def test_a_finished_pod_taken_by_a_scale_down_is_said_in_its_thread(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    """The autoscaler removes a node whose only pod has ended, and the pod with it, long before the reaper's
    retention is up: the thread must say where the pod went instead of stopping at "Failed"."""
    config = bot_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack, clock=sim.world.clock.datetime):
        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} -- false")
        wait_for_pods(sim, slack)
        root = the_root(slack)
        advance_until(sim, slack, headline_is(slack, "Failed"), limit=1800, stride=10)
        cleaned = lambda: [r for r in replies(slack, root) if "Cleaned up by the cluster" in r]  # noqa: E731
        advance_until(sim, slack, cleaned, limit=1800, stride=30)
        (said,) = slack.wait_until(cleaned, timeout=WAIT)
    assert not gpubot_pods(sim)
    assert "was deleted outside gpubot" in said and f"run {CUDA}" in said, said
    assert not [r for r in replies(slack, root) if r.startswith(":broom: Cleaned up the finished pod")]


def test_two_replicas_speak_once_and_the_follower_takes_over(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    config = bot_settings(sim, slack, tmp_path, redis_url)
    # Candidates retry every 0.5 s, not the default 8 s: this is about who speaks, not how soon after.
    quick = dataclasses.replace(config.leader, retry_period_seconds=0.5)
    one = dataclasses.replace(config, leader=dataclasses.replace(quick, identity="gpubot-a"))
    two = dataclasses.replace(config, leader=dataclasses.replace(quick, identity="gpubot-b"))
    with running_bot(one, slack) as first:
        slack.wait_until(lambda: first.leading, timeout=WAIT)
        with running_bot(two, slack) as second:
            assert slack.connections() == 2 and not second.leading
            typed = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
            slack.redeliver(typed)  # round robin: the other replica gets the same request
            root = slack.wait_until(lambda: roots(slack) and the_root(slack), timeout=WAIT)
            advance_until(sim, slack, headline_is(slack, "scaling up"))
            first.stop()  # the leader leaves (and releases the Lease)
            slack.wait_until(lambda: second.leading, timeout=WAIT)
            advance_until(
                sim, slack, lambda: any(r.startswith("<@U_ALICE> Running on") for r in replies(slack, root))
            )
            assert second.outbox.flush(WAIT)
    said = replies(slack, root)
    assert len(roots(slack)) == 1 and len(gpubot_pods(sim)) == 1
    assert len(said) == 1 and said[0].startswith("<@U_ALICE> Running on "), said


CLOCKS = (
    re.compile(r"( · )\d+[hms][\dhms]*(?=\\n|\"|$)"),  # a step's timer (the current one's runs on)
    re.compile(r" \(in [^)]*\)"),  # the lease's countdown
)


def without_clocks(update: dict[str, object]) -> str:
    text = json.dumps(update.get("blocks"), ensure_ascii=False, sort_keys=True)
    for clock in CLOCKS:
        text = clock.sub("", text)
    return text


def test_the_status_message_is_edited_for_news_and_never_for_a_clock_alone(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))
    assert bot.outbox.flush(WAIT)
    edits = [
        without_clocks(c.params)
        for c in slack.calls("chat.update")
        if c.status == 200 and c.params.get("ts") == root["ts"]
    ]
    # The scheduler retries the pending pod and the autoscaler re-reports its scale-up while the node
    # comes, each an event that moves the current step's timer; none of those is worth an edit.
    assert all(before != after for before, after in itertools.pairwise(edits)), edits
    headlines = [re.search(r'"\*([^*]+)\*', e).group(1) for e in edits]  # type: ignore[union-attr]
    assert headlines[-1].startswith("Running on "), headlines
    assert any(h.startswith(f"Waiting for a GPU node: {POOL} scaling up") for h in headlines), headlines


def test_a_released_gpu_taken_by_another_run_says_nothing_of_a_later_drain(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    sim.run(lambda: sim.world.registry.set_autoscaling(POOL, enabled=True, min_size=0, max_size=1))
    config = bot_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack, clock=sim.world.clock.datetime):
        alice = run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, step_reached(slack, "Running"))
        slack.type_command("U_BOB", "C_GPU", "/gpu", f"run {CUDA} --hours 1 -- sleep 60")
        bobs = lambda: [r for r in roots(slack) if r["ts"] != alice["ts"]]  # noqa: E731
        (bob,) = slack.wait_until(bobs, timeout=WAIT)
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
        advance_until(sim, slack, lambda: any("Running" in r for r in replies(slack, bob)))  # alice's node
        ended = lambda: any("finished" in r.lower() for r in replies(slack, bob))  # noqa: E731
        advance_until(sim, slack, ended, limit=600)
        gone = lambda: not [n for n in sim.nodes() if POOL in n["metadata"]["name"]]  # noqa: E731
        advance_until(sim, slack, gone, limit=3600, stride=30)
    assert not [r for r in replies(slack, alice) if "drained" in r], replies(slack, alice)
    assert not [r for r in replies(slack, bob) if "drained" in r], "bob's run ended by itself"
