"""Slack answers 429 or 5xx to 20% of the bot's Web API calls: no message is lost, none is reordered.

The story: alice starts two runs and bob one, all three reach Running, both release, every pod goes. The
emulator's transcript of a faulted run must hold exactly what a no-fault run's holds: every thread root in
its final state, every reply in each thread in the same order, every ephemeral each user got, in order.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from dataclasses import dataclass

import pytest

from sim.slack.runner import BackgroundSlack
from tests.faults.rig import EXTRA_RUNS, Rig, advance_watching, plain, rig
from tests.integration.botkit import CUDA, RUN, WAIT, replies, roots

pytestmark = pytest.mark.usefixtures("slack_env")

RUNS = (("U_ALICE", RUN), ("U_BOB", RUN), ("U_ALICE", f"run {CUDA} --hours 2 -- sleep 7200"))
USERS = ("U_ALICE", "U_BOB")
FAULT_RATE = float(os.environ.get("GPUBOT_SLACK_FAULT_RATE", "0.2"))


@dataclass(frozen=True)
class Transcript:
    roots: list[str]
    """Each thread root's final text, in the channel's order."""
    threads: list[list[str]]
    """Each thread's replies, oldest first."""
    ephemerals: dict[str, list[str]]

    @property
    def messages(self) -> int:
        return len(self.roots) + sum(map(len, self.threads)) + sum(map(len, self.ephemerals.values()))


def every_thread_says(rig: Rig, words: str) -> bool:
    found = roots(rig.slack)
    return len(found) == len(RUNS) and all(
        any(words in reply for reply in replies(rig.slack, root)) for root in found
    )


def every_headline_says(rig: Rig, words: str) -> bool:
    found = roots(rig.slack)
    return len(found) == len(RUNS) and all(words in root["text"] for root in found)


def has_roots(slack: BackgroundSlack, count: int) -> bool:
    return len(roots(slack)) >= count


def was_told(slack: BackgroundSlack, user: str, words: str) -> bool:
    return any(words in e["text"] for e in slack.ephemerals(user))


def tell_story(rig: Rig) -> Transcript:
    slack = rig.slack
    for count, (user, text) in enumerate(RUNS, start=1):
        assert slack.type_command(user, "C_GPU", "/gpu", text).acked
        slack.wait_until(functools.partial(has_roots, slack, count), timeout=WAIT)  # one at a time: in order
    advance_watching(rig, lambda: every_thread_says(rig, "Running"))
    for user in USERS:
        slack.type_command(user, "C_GPU", "/gpu", "release all")
        slack.wait_until(functools.partial(was_told, slack, user, "Released `"), timeout=WAIT)
    advance_watching(
        rig, lambda: every_headline_says(rig, "Released by its owner; its GPU is back in the pool")
    )
    assert rig.bot.outbox.flush(timeout=WAIT)
    found = roots(slack)
    return Transcript(
        roots=[plain(root["text"]) for root in found],
        threads=[[plain(text) for text in replies(slack, root)] for root in found],
        ephemerals={user: [plain(e["text"]) for e in slack.ephemerals(user)] for user in USERS},
    )


def failures_answered(rig: Rig) -> Counter[int]:
    return Counter(call.status for call in rig.slack.calls() if call.status != 200)


@pytest.fixture(scope="module")
def baseline(redis_server: str) -> Transcript:
    with rig(redis_server) as quiet:
        return tell_story(quiet)


EVERY_FIFTH = {"every": 5, "statuses": [429, 500, 503], "retry_after": 0}
"""Exactly 20%, in turn 429, 500 and 503: every kind is met, however the calls interleave."""
AT_RANDOM = [
    {"rate": FAULT_RATE, "statuses": [429, 500, 503], "seed": seed, "retry_after": 0}
    for seed in range(EXTRA_RUNS)
]
"""20% at random (seeded): the same message may fail twice running, so back-off doubles. The slower
variant (`rig.EXTRA_RUNS`)."""


def fault_id(faults: dict[str, object]) -> str:
    return f"every-{faults['every']}" if "every" in faults else f"random-seed-{faults['seed']}"


@pytest.mark.parametrize("faults", [EVERY_FIFTH, *AT_RANDOM], ids=fault_id)
def test_slack_429_and_5xx_lose_no_message_and_keep_each_thread_in_order(
    redis_url: str, baseline: Transcript, faults: dict[str, object]
) -> None:
    with rig(redis_url) as faulted:
        faulted.set_slack_faults(**faults)
        story = tell_story(faulted)
        answered = failures_answered(faulted)
        counters = faulted.bot.outbox.counters()

    assert len(baseline.roots) == len(RUNS)
    assert all(
        thread == [f"{thread[0].split(' ')[0]} Running on NODE, T after the request."]
        for thread in baseline.threads
    )
    assert story == baseline, (story, baseline)
    assert counters.failed == 0 and counters.retried == sum(answered.values()) > 0, (counters, answered)
    if "every" in faults:
        assert answered[429] > 0 and answered[500] > 0 and answered[503] > 0, answered
