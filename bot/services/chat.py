"""Services: the port through which services speak to people, in core notices; the composition root renders.

Kept to nine verbs so any chat (the Slack outbox, a test fake) can stand behind it. The three that wait
(`post`, `post_dm`, `upload`) raise `errors.Unreachable` when the destination refuses us for good (the bot
not in the channel, the channel archived or gone), so a caller can reach the person another way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from bot.core import notices, runform

Answer = Callable[[str], bool]
"""Answers the person who typed a command, privately, by the command's own response_url: that reaches them
even in a channel the bot is not in, where an ephemeral through the Web API is refused. True if sent."""


class Chat(Protocol):
    def post(
        self,
        channel: str,
        notice: notices.Notice,
        *,
        thread_ts: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Post and wait until it is delivered; return its ts (a thread root's ts is the thread's id).
        Not sent within `timeout` seconds (the chat's default when None): `Unavailable`, and withdrawn."""
        ...

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        """Queue a reply in a thread, in order after earlier writes to that channel."""
        ...

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        """Queue an edit of a message; unsent earlier edits of it are superseded."""
        ...

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        """Queue a message only `user` sees; with no channel (a press on the App Home, which has none) it
        goes to their DM."""
        ...

    def publish_home(self, user: str, home: notices.Home) -> None:
        """Queue `user`'s App Home tab; only the latest queued one is sent."""
        ...

    def dm(self, user: str, notice: notices.Notice) -> None:
        """Queue a direct message to `user` (the conversation is opened as needed)."""
        ...

    def post_dm(self, user: str, notice: notices.Notice, *, timeout: float | None = None) -> str:
        """A direct message to `user`, waited for as `post` waits."""
        ...

    def open_form(self, trigger_id: str, form: runform.RunForm) -> None:
        """Open the run form for whoever just asked (their `trigger_id`), at once: never queued, since a
        trigger lasts seconds. Raises the chat's refusal (`Invalid` for an expired trigger)."""
        ...

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        """Share `content` as a text file named `filename` in a direct message to `user`, introduced by
        `comment` (plain text); waited for as `post` waits, and returns the file's id. Slack refusing it for
        good raises that refusal (`Invalid`, `Unreachable`…); not sent within `timeout`: `Unavailable`."""
        ...
