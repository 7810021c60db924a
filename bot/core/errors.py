"""The small error taxonomy adapters convert vendor failures into, so the core never sees an SDK exception.

Each class says what a caller should do next: give up on the object, reread it, relist, wait, or fix input.
"""

from __future__ import annotations

from typing import Literal


class GpubotError(Exception):
    """Base of every failure an adapter reports; catching it catches all of them."""


class NotFound(GpubotError):
    """The object does not exist (any more); the caller treats it as already gone."""


class Conflict(GpubotError):
    """The object exists already, or changed under us; reread before deciding again."""


class Gone(GpubotError):
    """A resourceVersion is too old to resume from; relist, then watch again."""


class RateLimited(GpubotError):
    """The remote asked us to slow down; retry after `retry_after` seconds (None: it did not say when)."""

    def __init__(self, message: str = "rate limited", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(GpubotError):
    """The remote is down, unreachable or failing (5xx, connection errors); retry with back-off."""


class ChatUnavailable(Unavailable):
    """Slack is down, failing or too slow to take a message; retry with back-off. Apart from the cluster's
    Unavailable, so a person is told which of the two failed."""


Why = Literal["not-member", "archived", "gone"]
"""Why a chat destination refuses us: the bot is not a member (never invited, or removed), the channel is
archived, or it is gone (deleted, or private and the bot not in it)."""


class Unreachable(GpubotError):
    """A chat destination refuses every message until a person acts (invites the bot, unarchives the
    channel): retrying cannot help, another way to reach the person can."""

    def __init__(self, message: str, *, why: Why) -> None:
        super().__init__(message)
        self.why: Why = why


class Invalid(GpubotError):
    """The remote refused the request as it is (malformed, forbidden); retrying it unchanged cannot help."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Forbidden(Invalid):
    """Refused by policy (403): RBAC, or an admission plugin such as Pod Security; a person must act."""


class StillRunning(Unavailable):
    """A cloud change outlasted the wait; it goes on at the cloud. Its text says so, and how to check it."""


class OperationFailed(GpubotError):
    """The cloud accepted a change, then gave up on it; its text gives the reason in plain words."""
