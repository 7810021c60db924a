"""Slack's rate limits and injected faults, so a bot learns to back off before it meets the real 429s.

Limits are token buckets: per method per minute for the tiered methods, and about one message per second
per channel (with a short burst) for chat.postMessage, as Slack documents. Faults are seeded so a failing
test fails the same way every run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

TIER_PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
"""Slack's documented floors ("1+", "20+", "50+", "100+" calls per minute per method per app)."""

METHOD_TIERS = {
    # apps.connections.open: api.slack.com says Tier 1, slack-api-ref says t3. Tier 1 (1/min) would stall
    # every reconnect test for a minute, and real refreshes are hours apart, so t3.
    "apps.connections.open": 3,
    "auth.test": 4,
    "chat.update": 3,
    "chat.delete": 3,
    "chat.postEphemeral": 4,
    "conversations.open": 3,
    # Tier 4 on api.slack.com/methods/files.getUploadURLExternal and .../files.completeUploadExternal
    "files.getUploadURLExternal": 4,
    "files.completeUploadExternal": 4,
    "conversations.info": 3,
    "conversations.history": 3,
    "conversations.replies": 3,
    "users.info": 4,
    "views.open": 4,
    # slack-api-ref methods/*.json: views.* Tier 4, conversations.list and users.list Tier 2,
    # reactions.add and chat.scheduleMessage Tier 3; chat.getPermalink is "special" (treated as Tier 4).
    "views.push": 4,
    "views.update": 4,
    "views.publish": 4,
    "conversations.list": 2,
    "users.list": 2,
    "reactions.add": 3,
    "chat.scheduleMessage": 3,
    "chat.getPermalink": 4,
}


@dataclass
class RateLimitConfig:
    enabled: bool = True
    messages_per_second: float = 1.0
    """chat.postMessage per channel."""
    message_burst: int = 5
    """Slack tolerates short bursts before answering 429."""
    tier_per_minute: dict[int, int] = field(default_factory=lambda: dict(TIER_PER_MINUTE))
    method_tiers: dict[str, int] = field(default_factory=lambda: dict(METHOD_TIERS))
    default_tier: int = 3


@dataclass
class Bucket:
    capacity: float
    per_second: float
    tokens: float
    updated: float

    def take(self, now: float) -> float:
        """Take one token; return 0 when allowed, else the seconds until one will be there."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_second


class RateLimiter:
    def __init__(self, config: RateLimitConfig | None = None) -> None:
        self.config = config or RateLimitConfig()
        self._buckets: dict[tuple[str, str], Bucket] = {}

    def reset(self, config: RateLimitConfig | None = None) -> None:
        if config is not None:
            self.config = config
        self._buckets.clear()

    def check(self, method: str, *, channel: str, now: float) -> int:
        """0 if the call may proceed, else the Retry-After seconds Slack would send."""
        if not self.config.enabled:
            return 0
        key, capacity, per_second = self._limit_for(method, channel)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(capacity, per_second, capacity, now)
        wait = bucket.take(now)
        return 0 if wait == 0 else max(1, math.ceil(wait))

    def _limit_for(self, method: str, channel: str) -> tuple[tuple[str, str], float, float]:
        if method == "chat.postMessage":
            return (method, channel), float(self.config.message_burst), self.config.messages_per_second
        tier = self.config.method_tiers.get(method, self.config.default_tier)
        per_minute = self.config.tier_per_minute[tier]
        return (method, ""), float(per_minute), per_minute / 60.0


@dataclass(frozen=True)
class FaultConfig:
    rate: float = 0.0
    """Fraction of Web API calls that fail before doing anything."""
    statuses: tuple[int, ...] = (429, 500, 503)
    seed: int = 0
    methods: frozenset[str] = frozenset()
    """Empty means every method except apps.connections.open (kept healthy unless named)."""
    retry_after: int = 1
    every: int = 0
    """When set, fail exactly every Nth matching call instead of `rate` at random, cycling through
    `statuses`: a test then meets each status however its calls interleave."""
    delay: float = 0.0
    """Seconds a failing call takes to answer: a Slack that is slow, then refuses."""


class Faults:
    def __init__(self, config: FaultConfig | None = None) -> None:
        self.set(config or FaultConfig())

    def set(self, config: FaultConfig) -> None:
        self.config = config
        self._random = random.Random(config.seed)
        self._matching = 0

    def pick(self, method: str) -> int:
        """The HTTP status to fail this call with, or 0 to let it through."""
        applies = method in self.config.methods if self.config.methods else method != "apps.connections.open"
        if (self.config.rate <= 0 and self.config.every <= 0) or not applies:
            return 0
        if self.config.every > 0:
            self._matching += 1
            if self._matching % self.config.every:
                return 0
            return self.config.statuses[(self._matching // self.config.every - 1) % len(self.config.statuses)]
        if self._random.random() >= self.config.rate:
            return 0
        return self._random.choice(self.config.statuses)
