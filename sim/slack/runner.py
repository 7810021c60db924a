"""The Slack emulator on its own event-loop thread, driven from ordinary (test or demo) code.

Every read goes through the loop thread, and `wait_until` sleeps on a condition the emulator signals
on each API call, transcript change and connection change, so tests wait for events, not for time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from sim.slack import render
from sim.slack.deliveries import Delivery
from sim.slack.emulator import Call, SlackConfig, SlackEmulator
from sim.slack.ratelimits import FaultConfig, RateLimitConfig
from sim.slack.transcript import Json, Team

T = TypeVar("T")


class BackgroundSlack:
    def __init__(self, config: SlackConfig | None = None) -> None:
        self.emulator = SlackEmulator(config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="slack-emulator", daemon=True)
        self._activity = threading.Condition()
        self._version = 0
        self.emulator.on_activity = self._bump

    def __enter__(self) -> BackgroundSlack:
        self._thread.start()
        self.call(self.emulator.start)
        return self

    def __exit__(self, *exc: object) -> None:
        self.call(self.emulator.stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- where the bot points ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return self.emulator.url

    @property
    def api_url(self) -> str:
        """What to pass as `WebClient(base_url=...)`."""
        return self.emulator.url + "/api/"

    @property
    def bot_token(self) -> str:
        return self.emulator.config.bot_tokens[0]

    @property
    def app_token(self) -> str:
        return self.emulator.config.app_tokens[0]

    # -- running things on the loop ---------------------------------------------------------
    def call(self, coro_fn: Callable[[], Awaitable[T]], *, timeout: float = 60) -> T:
        async def wrapper() -> T:
            return await coro_fn()

        future: Future[T] = asyncio.run_coroutine_threadsafe(wrapper(), self._loop)
        return future.result(timeout=timeout)

    def run(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()

        return self.call(wrapper)

    # -- the simulated users ----------------------------------------------------------------
    def type_command(
        self, user: str, channel: str, command: str, text: str = "", *, team: Team | None = None
    ) -> Delivery:
        """`user` (id or name) types `command text` in `channel` (id, #name, or a user id for the DM);
        with `team`, as a user of that other workspace (the id taken as given)."""
        return self.call(lambda: self.emulator.users.type_command(user, channel, command, text, team=team))

    def click_button(
        self,
        user: str,
        channel: str,
        message_ts: str,
        action_id: str,
        value: str | None = None,
        *,
        team: Team | None = None,
    ) -> Delivery:
        """Click `action_id` on a message (or the user's own ephemeral); value defaults to the button's."""
        return self.call(
            lambda: self.emulator.users.click_button(user, channel, message_ts, action_id, value, team=team)
        )

    def submit_view(
        self, user: str, view_id: str, typed: dict[str, str] | None = None, *, team: Team | None = None
    ) -> Delivery:
        """Submit an open modal (views.open) with `typed` in its inputs by block_id; `shown` says what
        the ack did to it (closed, errors, updated, pushed, cleared)."""
        return self.call(lambda: self.emulator.users.submit_view(user, view_id, typed, team=team))

    def open_home(self, user: str, tab: str = "home") -> Delivery:
        """`user` opens the app's Home tab (or `messages`): Slack sends app_home_opened."""
        return self.call(lambda: self.emulator.users.open_home(user, tab))

    def click_home_button(self, user: str, action_id: str, value: str | None = None) -> Delivery:
        """Press a button on `user`'s published Home tab; `value` picks among buttons sharing the id."""
        return self.call(lambda: self.emulator.users.click_home_button(user, action_id, value))

    def home(self, user: str) -> Json | None:
        """The Home view views.publish last published for `user`, as Slack stores it; None before any."""
        return self.run(lambda: self.emulator.home_of(user))

    def home_text(self, user: str) -> str:
        """`user`'s Home tab as a reader sees it, one line per text line ("" when nothing is published)."""
        view = self.home(user)
        return "\n".join(render.render_blocks(view["blocks"])) if view else ""

    def view_text(self, view_id: str) -> str:
        """An open modal as its reader sees it, one line per text line ("" when it is not open)."""
        view = next((v for v in self.open_views() if v["id"] == view_id), None)
        return "\n".join(render.render_view(view)) if view else ""

    def open_views(self) -> list[Json]:
        """The modals open now, bottom of each stack first, as views.open answered them."""
        return self.run(lambda: [dict(v) for v in self.emulator.context.views])

    def redeliver(self, delivery: Delivery) -> Delivery:
        """Send an earlier request's payload again in a new envelope, as Slack does when an ack was lost."""
        accepts = delivery.type == "slash_commands"
        return self.call(lambda: self.emulator.deliver(delivery.type, delivery.payload, accepts))

    def post_message(self, user: str, channel: str, text: str, thread_ts: str = "") -> Delivery | None:
        """A user message; delivered as app_mention / DM message, else only recorded (None)."""
        return self.call(lambda: self.emulator.users.post_message(user, channel, text, thread_ts))

    # -- reading back -----------------------------------------------------------------------
    def transcript(self) -> Json:
        return self.run(self.emulator.workspace.snapshot)

    def render_text(self) -> str:
        return render.render_text(self.transcript())

    def messages(self, channel: str) -> list[Json]:
        """The channel's messages (thread replies included), oldest first, as transcript dicts."""
        snapshot = self.transcript()
        found = next((c for c in snapshot["channels"] if channel in (c["id"], "#" + c["name"])), None)
        return list(found["messages"]) if found else []

    def ephemerals(self, user: str | None = None) -> list[Json]:
        return [
            e for e in self.transcript()["ephemerals"] if user is None or user in (e["user"], e["username"])
        ]

    def file_content(self, file_id: str) -> bytes | None:
        """The bytes POSTed to a file's upload URL (None before the upload), as `url_private` serves them."""
        return self.run(lambda: f.content if (f := self.emulator.workspace.files.get(file_id)) else None)

    def calls(self, method: str | None = None) -> list[Call]:
        return self.run(lambda: [c for c in self.emulator.calls if method is None or c.method == method])

    def connections(self, *, draining: bool = False) -> int:
        """Live Socket Mode connections; with `draining`, also those told to disconnect but still open."""
        hub = self.emulator.hub
        return self.run(lambda: len(hub.connections) if draining else len(hub.live()))

    def wait_until(self, predicate: Callable[[], T], *, timeout: float = 10.0) -> T:
        """Re-check `predicate` after each emulator event until it is truthy; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            with self._activity:
                seen = self._version
            result = predicate()
            if result:
                return result
            with self._activity:
                while self._version == seen:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"condition not met within {timeout} s")
                    self._activity.wait(remaining)

    def wait_for_connections(self, count: int = 1, *, timeout: float = 10.0) -> int:
        return self.wait_until(lambda: self.connections() >= count and self.connections(), timeout=timeout)

    # -- steering ---------------------------------------------------------------------------
    def disconnect_all(self, reason: str = "refresh_requested") -> int:
        """Send every live Socket Mode connection a `disconnect` (the app should reconnect)."""
        return self.call(lambda: self.emulator.hub.disconnect_all(reason))

    def set_rate_limits(self, config: RateLimitConfig | None = None, **changes: Any) -> None:
        """`set_rate_limits(enabled=False)`, or a whole config; buckets start full again."""
        base = config or self.emulator.limiter.config
        self.run(lambda: self.emulator.limiter.reset(dataclasses.replace(base, **changes)))

    def set_faults(self, config: FaultConfig) -> None:
        self.run(lambda: self.emulator.faults.set(config))

    def change_channel(
        self,
        channel: str,
        *,
        bot_member: bool | None = None,
        private: bool | None = None,
        archived: bool | None = None,
        deleted: bool | None = None,
    ) -> None:
        """As a member or admin would: `bot_member=False` removes the bot (its posts there answer
        not_in_channel, or channel_not_found in a `private` channel), `archived=True` archives the channel
        (is_archived), `deleted=True` deletes it (channel_not_found)."""
        changes = {"bot_member": bot_member, "private": private, "archived": archived, "deleted": deleted}
        self.run(lambda: self.emulator.workspace.change_channel(channel, **changes))

    def configure_http(self, *, bot_url: str | None = None, signing_secret: str | None = None) -> None:
        """Switch to HTTP mode (signed POSTs to `bot_url`)."""

        def apply() -> None:
            http = self.emulator.config.http
            http.bot_url = bot_url if bot_url is not None else http.bot_url
            http.signing_secret = signing_secret if signing_secret is not None else http.signing_secret
            self.emulator.config.mode = "http"

        self.run(apply)

    def use_socket_mode(self) -> None:
        self.run(lambda: setattr(self.emulator.config, "mode", "socket_mode"))

    def _bump(self) -> None:
        with self._activity:
            self._version += 1
            self._activity.notify_all()
