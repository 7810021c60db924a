"""The `Reservations` port on a real private Redis (its Lua scripts), the in-process one, and the fallback."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bot.adapters import reservations, store


@pytest.fixture(params=["redis", "memory"])
def held(
    request: pytest.FixtureRequest, redis_url: str
) -> Iterator[reservations.RedisReservations | reservations.MemoryReservations]:
    kept = store.open_store(redis_url if request.param == "redis" else store.MEMORY_URL, prefix="t:")
    yield reservations.open_reservations(kept)
    kept.close()


def test_a_reservation_gets_the_next_ticket_and_sees_those_before_it(
    held: reservations.RedisReservations | reservations.MemoryReservations,
) -> None:
    first, seen = held.reserve("T1", "one")
    assert seen == {"T1": (first, "one")}
    second, seen = held.reserve("T2", "two")
    assert second > first and seen == {"T1": (first, "one"), "T2": (second, "two")}
    assert held.amend("T1", "one, named") and held.held()["T1"] == (first, "one, named")
    held.release("T1")
    assert not held.amend("T1", "again") and list(held.held()) == ["T2"]


def test_a_cancel_mark_holds_only_while_the_run_is_reserved(
    held: reservations.RedisReservations | reservations.MemoryReservations,
) -> None:
    assert not held.cancel("T1", "U_ALICE")  # nothing reserved: nothing to cancel
    held.reserve("T1", "one")
    assert held.cancelled_by("T1") == ""
    assert held.cancel("T1", "U_ADMIN") and held.cancelled_by("T1") == "U_ADMIN"
    held.release("T1")
    assert held.cancelled_by("T1") == "" and not held.cancel("T1", "U_ALICE")


def test_forty_reservations_at_once_on_two_connections_each_see_every_one_ahead(redis_url: str) -> None:
    """Two replicas' clients, forty threads: distinct tickets, and each answer holds every lower ticket."""
    replicas = [reservations.open_reservations(store.open_store(redis_url, prefix="g:")) for _ in "ab"]
    answers: dict[str, tuple[int, dict[str, tuple[int, str]]]] = {}
    start = threading.Barrier(40)

    def reserve(n: int) -> None:
        start.wait()
        answers[f"T{n}"] = replicas[n % 2].reserve(f"T{n}", f"run {n}")

    threads = [threading.Thread(target=reserve, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tickets = sorted(ticket for ticket, _ in answers.values())
    assert tickets == list(range(1, 41))
    for ticket, seen in answers.values():
        assert sorted(t for t, _ in seen.values() if t <= ticket) == list(range(1, ticket + 1))


def test_an_unreachable_redis_keeps_reservations_in_this_replica(caplog: pytest.LogCaptureFixture) -> None:
    down = reservations.open_reservations(store.open_store("redis://127.0.0.1:1/0", prefix="g:"))
    assert isinstance(down, reservations.RedisReservations)
    first, seen = down.reserve("T1", "one")
    second, seen = down.reserve("T2", "two")
    assert set(seen) == {"T1", "T2"} and second > first
    assert down.cancel("T1", "U_ALICE") and down.cancelled_by("T1") == "U_ALICE"
    down.release("T1")
    assert list(down.held()) == ["T2"]
    assert "held in this replica only" in caplog.text
