"""The Store port on a real private Redis, and the in-process fallback with the same semantics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bot.adapters import store


@pytest.fixture(params=["redis", "memory"])
def kept(request: pytest.FixtureRequest, redis_url: str) -> Iterator[store.RedisStore | store.MemoryStore]:
    opened = store.open_store(redis_url if request.param == "redis" else store.MEMORY_URL, prefix="t:")
    yield opened
    opened.close()


def test_a_claim_is_granted_once(kept: store.RedisStore | store.MemoryStore) -> None:
    assert kept.claim("slack-request:T1", 60)
    assert not kept.claim("slack-request:T1", 60)
    assert kept.claim("slack-request:T2", 60)


def test_samples_are_newest_first_and_bounded(kept: store.RedisStore | store.MemoryStore) -> None:
    for value in (1.0, 2.0, 3.0, 4.0):
        kept.add_sample("s", value, keep=3)
    assert kept.samples("s") == [4.0, 3.0, 2.0]
    assert kept.samples("other") == []


def test_two_replicas_on_one_redis_share_claims(redis_url: str) -> None:
    one, two = (store.open_store(redis_url, prefix="gpubot:") for _ in range(2))
    assert one.claim("slack-request:T9", 60) and not two.claim("slack-request:T9", 60)
    with redis.Redis.from_url(redis_url) as raw:
        assert 0 < raw.ttl("gpubot:slack-request:T9") <= 60


def test_an_unreachable_redis_fails_open() -> None:
    down = store.open_store("redis://127.0.0.1:1/0", prefix="gpubot:")
    assert down.claim("slack-request:T1", 60)  # a duplicate is better than a dropped command
    down.add_sample("s", 1.0, keep=3)
    assert down.samples("s") == []
