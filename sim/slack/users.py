"""The people on the other side: typing a slash command, clicking a button, writing a message.

Each action is recorded, turned into the exact payload Slack would send, handed to the app over the
configured transport, and whatever the app acked is shown in the transcript as Slack would show it.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Awaitable, Callable, Mapping

from sim.slack import apphome, payloads, submissions
from sim.slack.deliveries import Delivery
from sim.slack.responses import ResponseTarget, ResponseUrls, apply_response, refusal
from sim.slack.transcript import Channel, Ephemeral, Json, Message, Team, Workspace
from sim.slack.webapi import Context

Deliver = Callable[[str, Json, bool], Awaitable[Delivery]]

SLACK_NOTICES = {
    "timeout": 'failed with the error "operation_timeout"',
    "no_connection": 'failed with the error "dispatch_failed"',
    # An ack whose blocks Slack refuses (haruotsu/slack-review-notify#99: a duplicate action_id).
    "invalid_response": 'failed with the error "invalid_command_response"',
}


class SimulatedUsers:
    def __init__(
        self,
        workspace: Workspace,
        *,
        deliver: Deliver,
        response_urls: ResponseUrls,
        context: Context,
        base_url: Callable[[], str],
    ) -> None:
        self.workspace = workspace
        self._deliver = deliver
        self._response_urls = response_urls
        self._context = context
        self._triggers = context.triggers
        self._base_url = base_url

    def _actor(self, user: str, team: Team | None) -> tuple[str, Team]:
        """(user id, the workspace they act from). A user of another team is taken at their word: their
        id may even be one of ours, since Slack user ids are unique only within a workspace."""
        home = self.workspace.identity.home()
        if team is None or team == home:
            return self._user(user), home
        return user, team

    def _user(self, user: str) -> str:
        if user in self.workspace.users:
            return user
        by_name = next((u.id for u in self.workspace.users.values() if u.name == user), None)
        if by_name is None:
            raise LookupError(f"no user {user!r}")
        return by_name

    def _channel(self, ref: str) -> Channel:
        channel = self.workspace.resolve_channel(ref)
        if channel is None:
            raise LookupError(f"no channel {ref!r}")
        if channel.archived:
            raise LookupError(f"channel {ref!r} is archived: nobody can type or click in it")
        return channel

    def _trigger(self) -> str:
        trigger_id = payloads.new_trigger_id()
        self._triggers[trigger_id] = time.time()
        return trigger_id

    async def type_command(
        self, user: str, channel: str, command: str, text: str = "", *, team: Team | None = None
    ) -> Delivery:
        """`team`: the user acts from another workspace (a Slack Connect channel, a sister workspace)."""
        (user_id, acting), chan = self._actor(user, team), self._channel(channel)
        self.workspace.record_action(
            kind="command", user=user_id, channel=chan.id, detail=f"{command} {text}"
        )
        target = ResponseTarget(user_id, chan.id)
        payload = payloads.slash_command(
            self.workspace,
            user=user_id,
            team=acting,
            channel=chan.id,
            command=command,
            text=text,
            response_url=self._response_urls.issue(self._base_url(), "commands", target),
            trigger_id=self._trigger(),
        )
        delivery = await self._deliver("slash_commands", payload, True)
        if delivery.acked and refusal(delivery.ack_payload):
            shown = self._slack_notice(target, f"{command} {SLACK_NOTICES['invalid_response']}")
        elif delivery.acked:
            shown = apply_response(self.workspace, target, delivery.ack_payload, source="ack")
        else:
            shown = self._slack_notice(target, f"{command} {SLACK_NOTICES.get(delivery.error, 'failed')}")
        return dataclasses.replace(delivery, shown=shown)

    async def click_button(
        self,
        user: str,
        channel: str,
        message_ts: str,
        action_id: str,
        value: str | None = None,
        *,
        team: Team | None = None,
    ) -> Delivery:
        (user_id, acting), chan = self._actor(user, team), self._channel(channel)
        target_message = self._clickable(user_id, chan.id, message_ts)
        button = payloads.find_button(target_message.blocks, action_id)
        action = self.workspace.record_action(kind="click", user=user_id, channel=chan.id, detail=action_id)
        thread_ts = target_message.thread_ts if isinstance(target_message, Message) else ""
        target = ResponseTarget(user_id, chan.id, thread_ts, original=target_message)
        payload = payloads.block_actions(
            self.workspace,
            user=user_id,
            team=acting,
            target=target_message,
            button=button,
            value=button.value if value is None else value,
            action_ts=action.ts,
            response_url=self._response_urls.issue(self._base_url(), "actions", target),
            trigger_id=self._trigger(),
        )
        delivery = await self._deliver("interactive", payload, False)
        # Slack ignores a payload on a block_actions ack; an unacked click only shows a warning icon.
        return dataclasses.replace(delivery, shown="nothing" if delivery.acked else "warning")

    async def submit_view(
        self, user: str, view_id: str, typed: Mapping[str, str] | None = None, *, team: Team | None = None
    ) -> Delivery:
        """Press Submit on an open modal, with `typed` in its inputs (by block_id); the ack's
        response_action then closes, updates, pushes or keeps the modal (`Delivery.shown` says which)."""
        user_id, acting = self._actor(user, team)
        view = submissions.find_view(self._context, view_id)
        self.workspace.record_action(
            kind="submit", user=user_id, channel="", detail=str(view.get("callback_id", ""))
        )
        payload = submissions.view_submission(
            self.workspace,
            user=user_id,
            team=acting,
            view=view,
            typed=typed or {},
            trigger_id=self._trigger(),
        )
        delivery = await self._deliver("interactive", payload, True)
        shown = (
            submissions.apply_ack(self._context, view, delivery.ack_payload) if delivery.acked else "warning"
        )
        self.workspace.changed()
        return dataclasses.replace(delivery, shown=shown)

    async def open_home(self, user: str, tab: str = "home") -> Delivery:
        """The user opens the app's Home (or Messages) tab: Slack sends app_home_opened, every time."""
        if tab not in apphome.TABS:
            raise LookupError(f"no App Home tab {tab!r}; tabs are {', '.join(apphome.TABS)}")
        user_id = self._user(user)
        dm = self.workspace.open_dm(user_id)
        self.workspace.record_action(kind="home", user=user_id, channel="", detail=tab)
        view = self._context.homes.get(user_id)
        event = apphome.opened_event(self.workspace, user=user_id, channel=dm.id, tab=tab, view=view)
        return await self._deliver("events_api", event, False)

    async def click_home_button(
        self, user: str, action_id: str, value: str | None = None, *, team: Team | None = None
    ) -> Delivery:
        """Press a button on the Home tab published for `user`; `value` picks one of several that share
        the action id (one per workload)."""
        user_id, acting = self._actor(user, team)
        view = self._context.homes.get(user_id)
        if view is None:
            raise LookupError(f"nothing is published on the App Home of {user_id}")
        button = apphome.find_button(view, action_id, value)
        action = self.workspace.record_action(kind="click", user=user_id, channel="", detail=action_id)
        payload = apphome.block_actions(
            self.workspace,
            user=user_id,
            team=acting,
            view=view,
            button=button,
            action_ts=action.ts,
            trigger_id=self._trigger(),
        )
        delivery = await self._deliver("interactive", payload, False)
        return dataclasses.replace(delivery, shown="nothing" if delivery.acked else "warning")

    def _clickable(self, user: str, channel: str, ts: str) -> Message | Ephemeral:
        message = self.workspace.messages.get((channel, ts))
        if message is not None and not message.deleted:
            return message
        ephemeral = self.workspace.find_ephemeral(channel, ts)
        if ephemeral is not None and ephemeral.user == user and not ephemeral.deleted:
            return ephemeral
        raise LookupError(f"no message {ts} in {channel} that {user} can see")

    async def post_message(self, user: str, channel: str, text: str, thread_ts: str = "") -> Delivery | None:
        """A user writes; the app hears it as `app_mention` (naming the bot) or `message` (in a DM)."""
        user_id, chan = self._user(user), self._channel(channel)
        parent = self.workspace.messages.get((chan.id, thread_ts))
        message = self.workspace.post(
            Message(
                channel=chan.id,
                ts=self.workspace.clock.next(),
                text=text,
                blocks=[],
                user=user_id,
                thread_ts=(parent.thread_ts or parent.ts) if parent else "",
            )
        )
        mention = (
            re.search(rf"<@{re.escape(self.workspace.identity.bot_user_id)}(\|[^>]*)?>", text) is not None
        )
        if not mention and not chan.is_im:
            return None
        event = payloads.message_event(self.workspace, message=message, mention=mention)
        return await self._deliver("events_api", event, False)

    def _slack_notice(self, target: ResponseTarget, text: str) -> str:
        notice = Ephemeral(target.channel, self.workspace.clock.next(), target.user, text, [], "slack")
        self.workspace.add_ephemeral(notice)
        return "error_notice"


def respond(urls: ResponseUrls, workspace: Workspace, hook: str, body: Json) -> tuple[int, Json | str]:
    """A POST to a response_url: (HTTP status, JSON answer, or the plain-text error Slack sends)."""
    refused = refusal(body)
    if refused:
        return 400, refused
    target = urls.use(hook)
    if isinstance(target, str):
        return 404, {"ok": False, "error": target}
    apply_response(workspace, target, body, source="response_url")
    return 200, {"ok": True}
