"""Adapters: the services' `Chat` port over the outbox; notices become Block Kit here, at the edge."""

from __future__ import annotations

from bot.adapters import slack_forms, slack_outbox, slack_render
from bot.core import notices, runform


class OutboxChat:
    """The services' `Chat` port over the outbox: notices rendered to Block Kit here, at the edge."""

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
        text, blocks = slack_render.render(notice)
        return self.outbox.post(channel, text, blocks, thread_ts=thread_ts, timeout=timeout)

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.reply(channel, thread_ts, text, blocks)

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.update(channel, ts, text, blocks)

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        if channel:
            self.outbox.ephemeral(channel, user, text, blocks)
        else:
            self.outbox.dm(user, text, blocks)

    def publish_home(self, user: str, home: notices.Home) -> None:
        self.outbox.publish(user, slack_render.render_home(home))

    def dm(self, user: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.dm(user, text, blocks)

    def post_dm(self, user: str, notice: notices.Notice, *, timeout: float | None = None) -> str:
        text, blocks = slack_render.render(notice)
        return self.outbox.post_dm(user, text, blocks, timeout=timeout)

    def open_form(self, trigger_id: str, form: runform.RunForm) -> None:
        self.outbox.open_view(trigger_id, slack_forms.render_run_form(form))

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        return self.outbox.upload(
            user, filename, content, comment=slack_render.fallback(comment), timeout=timeout
        )
