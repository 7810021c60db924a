"""Adapters: the services' `Chat` port over the outbox; notices become Block Kit here, at the edge."""

from __future__ import annotations

from bot.adapters import slack_forms, slack_outbox, slack_render
from bot.core import notices, runform


class OutboxChat:
    def __init__(self, outbox: slack_outbox.SlackOutbox) -> None:
        self.outbox = outbox

    def post(
        self,
        channel: str,
        notice: notices.Notice,
        *,
        thread_ts: str | None = None,
        timeout: float | None = None,
    ) -> str:
        return self.outbox.post(channel, *slack_render.render(notice), thread_ts=thread_ts, timeout=timeout)

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        self.outbox.reply(channel, thread_ts, *slack_render.render(notice))

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        self.outbox.update(channel, ts, *slack_render.render(notice))

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        if channel:
            self.outbox.ephemeral(channel, user, *slack_render.render(notice))
        else:  # no channel (a press on the App Home): their DM
            self.dm(user, notice)

    def publish_home(self, user: str, home: notices.Home) -> None:
        self.outbox.publish(user, slack_render.render_home(home))

    def dm(self, user: str, notice: notices.Notice) -> None:
        self.outbox.dm(user, *slack_render.render(notice))

    def post_dm(self, user: str, notice: notices.Notice, *, timeout: float | None = None) -> str:
        return self.outbox.post_dm(user, *slack_render.render(notice), timeout=timeout)

    def open_form(self, trigger_id: str, form: runform.RunForm) -> None:
        self.outbox.open_view(trigger_id, slack_forms.render_run_form(form))

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        return self.outbox.upload(
            user, filename, content, comment=slack_render.fallback(comment), timeout=timeout
        )
