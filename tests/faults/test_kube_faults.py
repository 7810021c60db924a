"""The Kubernetes API answers 5xx to 5% of the bot's calls and holds another 5% past its timeout (half of
those carried out anyway): every `/gpu run`, `/gpu extend` and `/gpu release` ends in success or a stated
failure in Slack, and nothing is orphaned.

Orphans are a gpubot pod no thread follows, a thread that claims a pod that does not exist, two pods for
one thread, or a lease extended twice for one `/gpu extend` (a retried patch applied twice).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.core import labels
from sim.cluster.store import ADDED, DELETED, Change
from sim.slack.runner import BackgroundSlack
from tests.faults.rig import EXTRA_RUNS, HOLD_SECONDS, QUICK_REQUESTS, Rig, advance_watching, rig
from tests.integration.botkit import CUDA, RUN, WAIT, Json, replies, roots

pytestmark = pytest.mark.usefixtures("slack_env")

FAULT_RATE = float(os.environ.get("GPUBOT_KUBE_FAULT_RATE", "0.1"))
IN_TURN = {"every": 10, "hold_seconds": HOLD_SECONDS}
"""Exactly every 10th request fails, in turn 500, 503 and held past the client's timeout."""
AT_RANDOM = [
    {"error_rate": FAULT_RATE / 2, "timeout_rate": FAULT_RATE / 2, "hold_seconds": HOLD_SECONDS, "seed": seed}
    for seed in range(EXTRA_RUNS)
]
"""10% at random (seeded), half 500/503, half held: the slower variant (`rig.EXTRA_RUNS`)."""
STATED_FAILURE = ("That did not work", "could not be reached", "Try again")
WORKED = {"extend": "Extended `", "release": "Released `", "status": "*GPU pools*"}
REFUSED = (
    "no lease to extend",
    "is gone already",
    "is being released already",
    "There is no gpubot workload",
)
"""Friendly refusals (the pod is going or gone): an answer, not a failure."""


@dataclass
class PodLedger:
    """Every gpubot pod the sim stored, as it last was (deleted ones too), from the sim's commit path."""

    last: dict[str, Json] = field(default_factory=dict)
    threads: dict[str, list[str]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    def record(self, change: Change) -> None:
        metadata = change.obj["metadata"]
        if change.resource != "pods" or metadata.get("labels", {}).get(labels.MANAGED_BY_LABEL) != "gpubot":
            return
        name = metadata["name"]
        self.last[name] = change.obj
        if change.type == ADDED:
            thread = metadata.get("annotations", {}).get(labels.THREAD_TS_ANNOTATION, "")
            self.threads.setdefault(thread, []).append(name)
        elif change.type == DELETED:
            self.deleted.add(name)

    def audit(self, name: str) -> list[Json]:
        found: list[Json] = json.loads(self.last[name]["metadata"]["annotations"][labels.AUDIT_ANNOTATION])
        return found


@dataclass(frozen=True)
class Said:
    command: str
    user: str
    answers: list[str]
    """Ephemerals the user got after typing it."""
    root_ts: str = ""
    """For a run: the thread root it started, if it got that far."""

    @property
    def verb(self) -> str:
        return self.command.split()[0]

    def outcome(self, channel: list[Json]) -> str:
        """worked, refused, failed (said so), or unanswered; a run by its root's final state."""
        root = next((r for r in channel if r["ts"] == self.root_ts), None)
        if root is not None and root["text"].startswith(":x:"):
            return "failed" if any(w in root["text"] for w in STATED_FAILURE) else "refused"
        if root is not None:
            return "worked" if pod_named_in(root) else "unanswered"
        if self.verb in WORKED and any(WORKED[self.verb] in text for text in self.answers):
            return "worked"
        if any(word in text for text in self.answers for word in REFUSED):
            return "refused"
        return "failed" if any(w in t for t in self.answers for w in STATED_FAILURE) else "unanswered"


def answers_to(slack: BackgroundSlack, user: str, before: int) -> list[str]:
    """What `user` was told after their first `before` answers (acks left out: they come first)."""
    return [e["text"] for e in slack.ephemerals(user) if e["source"] != "ack"][before:]


def ask(rig: Rig, user: str, command: str) -> Said:
    """Type a command and wait for its answer: a new thread root for a run, an ephemeral otherwise."""
    slack = rig.slack
    told, threads = len(answers_to(slack, user, 0)), len(roots(slack))
    assert slack.type_command(user, "C_GPU", "/gpu", command).acked
    slack.wait_until(functools.partial(new_root_or_answer, slack, user, told, threads), timeout=WAIT)
    started = roots(slack)[threads:]
    return Said(command, user, answers_to(slack, user, told), started[0]["ts"] if started else "")


def new_root_or_answer(slack: BackgroundSlack, user: str, told: int, threads: int) -> bool:
    return len(roots(slack)) > threads or bool(answers_to(slack, user, told))


def pod_named_in(root: Json) -> str:
    """The pod a thread root follows, from its status text (`default/<name>: ...`)."""
    head = root["text"].split(":", 1)[0]
    return head.split("/", 1)[1] if head.startswith("default/") else ""


def settled(rig: Rig, ledger: PodLedger, finished: Callable[[Json], bool]) -> bool:
    return all(finished(root) for root in roots(rig.slack)) and bool(ledger.last)


def is_running_or_refused(slack: BackgroundSlack, root: Json) -> bool:
    return root["text"].startswith(":x:") or any("> Running on " in text for text in replies(slack, root))


def is_over(slack: BackgroundSlack, live: set[str], root: Json) -> bool:
    """Released and gone, refused, or still running (not released)."""
    if root["text"].startswith(":x:") or pod_named_in(root) in live:
        return True
    return "its GPU is back in the pool" in root["text"]


def fault_id(faults: dict[str, float]) -> str:
    return f"every-{faults['every']}" if "every" in faults else f"random-seed-{faults['seed']}"


@pytest.mark.parametrize("faults", [IN_TURN, *AT_RANDOM], ids=fault_id)
def test_commands_end_in_success_or_a_stated_failure_and_leave_no_orphan(
    tmp_path: Path, redis_url: str, faults: dict[str, float]
) -> None:
    with rig(tmp_path, redis_url) as faulty:
        sim, slack = faulty.sim, faulty.slack
        ledger = PodLedger()
        sim.run(lambda: sim.world.store.subscribe(ledger.record))
        faulty.set_api_faults(**faults)
        said = [
            ask(faulty, "U_ALICE", RUN),
            ask(faulty, "U_BOB", RUN),
            ask(faulty, "U_ALICE", f"run {CUDA} --name alice-two -- sleep 7200"),
            ask(faulty, "U_BOB", f"run {CUDA} --name bob-two -- sleep 7200"),
        ]
        running = functools.partial(is_running_or_refused, slack)
        advance_watching(faulty, lambda: settled(faulty, ledger, running))
        alices = next((name for name in ledger.last if "u-alice" in name), "")
        said += [
            ask(faulty, "U_ALICE", "status"),
            ask(faulty, "U_ALICE", "extend alice-two 1"),
            ask(faulty, "U_BOB", "extend bob-two 2"),
            ask(faulty, "U_ALICE", f"extend {alices} 1"),
            ask(faulty, "U_BOB", "status"),
            ask(faulty, "U_BOB", "release all"),
            ask(faulty, "U_ALICE", "release alice-two"),
            ask(faulty, "U_ALICE", "extend alice-two 1"),
            ask(faulty, "U_ALICE", f"extend {alices} 1"),
            ask(faulty, "U_BOB", "status"),
        ]
        keep = {alices}
        over = functools.partial(is_over, slack, keep)
        advance_watching(faulty, lambda: settled(faulty, ledger, over))
        assert faulty.bot.outbox.flush(timeout=WAIT)
        counts = faulty.api_faults()["counts"]
        channel = roots(slack)
        live = {p["metadata"]["name"]: p for p in sim.pods() if p["metadata"]["name"] in ledger.last}

    outcomes = [(s.command, s.outcome(channel)) for s in said]
    assert all(outcome != "unanswered" for _, outcome in outcomes), (outcomes, said)
    assert counts.get("errors", 0) + counts.get("timeouts", 0) > 0, counts
    if "every" in faults:
        assert counts.get("errors", 0) > 0 and counts.get("timeouts", 0) > 0, counts

    # no two pods for one thread, and a pod for every run that said it worked
    assert all(len(names) == 1 for names in ledger.threads.values()), ledger.threads
    assert len(ledger.last) == sum(s.verb == "run" and s.outcome(channel) == "worked" for s in said)
    # every gpubot pod is followed by its thread, and every thread's pod exists or is reported gone
    by_ts = {root["ts"]: root for root in channel}
    for name, pod in live.items():
        thread = pod["metadata"]["annotations"][labels.THREAD_TS_ANNOTATION]
        assert thread in by_ts and pod_named_in(by_ts[thread]) == name, (name, by_ts.get(thread))
    for root in channel:
        if root["text"].startswith(":x:"):
            assert root["ts"] not in ledger.threads, root  # "nothing was created" must be true
            continue
        name = pod_named_in(root)
        gone = "its GPU is back in the pool" in root["text"]  # every deleted pod's headline says so
        assert name in ledger.last and (name in live) != gone, (name, root["text"])
    # each extension that said it worked is on its pod exactly once
    extended = [s for s in said if s.verb == "extend" and s.outcome(channel) == "worked"]
    for name in ledger.last:
        written = [entry for entry in ledger.audit(name) if entry["action"] == "extend"]
        told = [s for s in extended if f"`{name}`" in " ".join(s.answers)]
        assert len(written) == len(told), (name, written, told)


def test_a_create_refused_every_time_is_tried_within_the_one_retry_budget(
    tmp_path: Path, redis_url: str
) -> None:
    """One retry layer around pod create: the adapter's `attempts`, then the thread says it failed. The
    launcher once retried the adapter's retries as well: 3 x 4 = 12 creates for one run."""
    with rig(tmp_path, redis_url) as faulty:
        faulty.set_api_faults(error_rate=1.0, verbs=["create"], resources=["pods"])
        said = ask(faulty, "U_ALICE", RUN)
        slack = faulty.slack
        slack.wait_until(
            lambda: any(r["ts"] == said.root_ts and r["text"].startswith(":x:") for r in roots(slack)),
            timeout=WAIT,
        )
        (root,) = roots(slack)
        assert any(word in root["text"] for word in STATED_FAILURE), root["text"]
        assert faulty.api_faults()["counts"]["errors"] == QUICK_REQUESTS.attempts == 4
        assert not [p for p in faulty.sim.pods() if p["metadata"]["labels"].get(labels.MANAGED_BY_LABEL)]
