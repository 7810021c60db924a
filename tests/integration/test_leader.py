"""Leader election between real electors over the sim's Lease API, on the sim's manual clock.

Candidates retry every 50 real milliseconds while simulated time stands still, so a lease expires only
when a test advances the sim clock. Tests wait on callbacks and observations, never on fixed sleeps.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest
from kubernetes import client

from bot.adapters import kube, leader
from bot.core import fields
from bot.settings import LeaderSettings
from sim.cluster import world

T = TypeVar("T")
NS = "default"
LEASE = "gpubot-leader"
WAIT = 10.0
"""Real seconds to wait for an elector; only reached when something is broken."""
FAST = LeaderSettings(
    lease_name=LEASE,
    identity="",
    lease_duration_seconds=15,
    renew_deadline_seconds=10,
    retry_period_seconds=0.05,
)
"""client-go's usual lease and deadline, the steps that fast so the tests wait on simulated time only."""
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class WatchedClock:
    """The sim clock, noting every time an elector asks it: a step has decided once it asks again."""

    def __init__(self, sim: world.BackgroundWorld) -> None:
        self.sim = sim
        self.asked: list[datetime] = []

    def __call__(self) -> datetime:
        now = self.sim.world.clock.datetime()
        self.asked.append(now)
        return now

    def asked_since(self, moment: datetime) -> int:
        return sum(1 for seen in list(self.asked) if seen >= moment)


@dataclasses.dataclass
class Candidate:
    elector: leader.LeaderElector
    clock: WatchedClock
    started: threading.Event
    stopped: threading.Event


def wait_for(predicate: Callable[[], T], *, timeout: float = WAIT) -> T:
    """Poll `predicate` until it is truthy; the electors run on their own threads."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        time.sleep(0.01)
    return result


@pytest.fixture
def candidates(
    sim: world.BackgroundWorld, api_client: client.ApiClient
) -> Iterator[Callable[[str], Candidate]]:
    made: list[Candidate] = []

    def make(identity: str) -> Candidate:
        started, stopped = threading.Event(), threading.Event()
        clock = WatchedClock(sim)
        elector = leader.LeaderElector(
            api_client,
            namespace=NS,
            settings=dataclasses.replace(FAST, identity=identity),
            on_started_leading=started.set,
            on_stopped_leading=stopped.set,
            clock=clock,
        )
        made.append(Candidate(elector, clock, started, stopped))
        elector.start()
        return made[-1]

    yield make
    for candidate in made:
        candidate.elector.stop()


def stored_lease(api_client: client.ApiClient) -> dict[str, Any]:
    """The Lease exactly as the sim stores and serves it."""
    response = client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, NS, _preload_content=False)
    return kube.read_json(response)


def test_two_candidates_elect_exactly_one(
    candidates: Callable[[str], Candidate], api_client: client.ApiClient
) -> None:
    a = candidates("a")
    assert a.started.wait(WAIT) and a.elector.is_leader
    b = candidates("b")
    wait_for(lambda: b.elector.leader == "a")  # b read a's valid lease and decided to wait
    assert not b.elector.is_leader and not b.started.is_set()
    spec = stored_lease(api_client)["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 15, 0)
    assert MICRO_TIME.fullmatch(spec["renewTime"]) and MICRO_TIME.fullmatch(spec["acquireTime"])


def test_a_released_lease_is_taken_over_at_once(
    sim: world.BackgroundWorld, candidates: Callable[[str], Candidate], api_client: client.ApiClient
) -> None:
    a = candidates("a")
    assert a.started.wait(WAIT)
    b = candidates("b")
    wait_for(lambda: b.elector.leader == "a")
    before = sim.world.clock.datetime()

    assert a.elector.stop()
    assert a.stopped.is_set() and not a.elector.is_leader
    assert b.started.wait(WAIT) and b.elector.is_leader
    assert sim.world.clock.datetime() == before  # no simulated time passed: the release freed the lease
    spec = stored_lease(api_client)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


def test_after_a_crash_the_lease_must_expire_first(
    sim: world.BackgroundWorld, candidates: Callable[[str], Candidate], api_client: client.ApiClient
) -> None:
    a = candidates("a")
    assert a.started.wait(WAIT)
    b = candidates("b")
    wait_for(lambda: b.elector.leader == "a")
    assert a.elector.stop(release=False)  # as a crash would: the lease still names a
    assert stored_lease(api_client)["spec"]["holderIdentity"] == "a"
    renewed = fields.as_time(stored_lease(api_client)["spec"]["renewTime"])
    assert renewed is not None

    sim.advance(14)
    almost = renewed + timedelta(seconds=14)
    wait_for(lambda: b.clock.asked_since(almost) >= 2)  # one whole step decided at 14 s
    assert not b.elector.is_leader and stored_lease(api_client)["spec"]["holderIdentity"] == "a"

    sim.advance(1)
    assert b.started.wait(WAIT)
    spec = stored_lease(api_client)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert fields.as_time(spec["acquireTime"]) == renewed + timedelta(seconds=15)


def test_a_conflict_on_renew_loses_leadership(
    sim: world.BackgroundWorld, candidates: Callable[[str], Candidate], api_client: client.ApiClient
) -> None:
    a = candidates("a")
    assert a.started.wait(WAIT)
    leases = client.CoordinationV1Api(api_client)
    taken = leases.read_namespaced_lease(LEASE, NS)
    assert taken.spec is not None
    taken.spec.holder_identity = "intruder"
    taken.spec.renew_time = sim.world.clock.datetime()
    leases.replace_namespaced_lease(LEASE, NS, taken)  # a's next renewal carries a stale resourceVersion

    assert a.stopped.wait(WAIT)
    assert not a.elector.is_leader
    wait_for(lambda: a.elector.leader == "intruder")  # a candidate again, waiting out the intruder's lease
    assert stored_lease(api_client)["spec"]["holderIdentity"] == "intruder"


def test_settings_that_cannot_work_are_refused(api_client: client.ApiClient) -> None:
    bad = LeaderSettings(identity="a", lease_duration_seconds=10, renew_deadline_seconds=10)
    with pytest.raises(ValueError, match=r"lease duration \(10 s\) must be more than the renew deadline"):
        leader.LeaderElector(api_client, namespace=NS, settings=bad)
