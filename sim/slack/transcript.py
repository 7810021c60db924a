"""The workspace the emulator keeps: users, channels, messages with edit history, ephemerals, what users did.

Everything a test or the demo reads back is here; `snapshot()` is the JSON the transcript endpoint serves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class User:
    id: str
    name: str
    real_name: str = ""
    is_admin: bool = False
    is_bot: bool = False

    def to_api(self, team_id: str) -> Json:
        real_name = self.real_name or self.name.title()
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "deleted": False,
            "real_name": real_name,
            "tz": "Etc/UTC",
            "is_admin": self.is_admin,
            "is_owner": False,
            "is_bot": self.is_bot,
            "profile": {"real_name": real_name, "display_name": self.name},
        }


@dataclass
class Channel:
    id: str
    name: str
    is_im: bool = False
    im_user: str = ""
    """For a DM: the human on the other side."""
    bot_member: bool = True
    """Slack refuses chat.postMessage with not_in_channel until the bot has joined (or once it is removed)."""
    members: set[str] = field(default_factory=set)
    private: bool = False
    """Hidden from a bot that is not a member: its posts answer channel_not_found, not not_in_channel."""
    archived: bool = False
    """Read-only: posts answer is_archived, edits is_inactive, and nobody can type a command in it."""
    deleted: bool = False
    """Gone for the API (channel_not_found); kept only so the transcript still shows what it held."""

    def to_api(self) -> Json:
        if self.is_im:
            return {"id": self.id, "is_im": True, "user": self.im_user, "is_open": True}
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": True,
            "is_im": False,
            "is_private": self.private,
            "is_member": self.bot_member,
            "is_archived": self.archived,
            "num_members": len(self.members),
        }


@dataclass(frozen=True)
class Revision:
    """One version of a message; every chat.update adds one so edits stay visible."""

    text: str
    blocks: list[Json]
    at_ts: str


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[Json]
    user: str
    bot_id: str = ""
    thread_ts: str = ""
    reply_broadcast: bool = False
    metadata: Json | None = None
    revisions: list[Revision] = field(default_factory=list)
    deleted: bool = False
    replies: list[str] = field(default_factory=list)
    files: list[Json] = field(default_factory=list)
    """File objects shared with this message (files.completeUploadExternal), as the API shows them."""
    reactions: dict[str, list[str]] = field(default_factory=dict)
    """Emoji name → the users who reacted with it, in order (reactions.add)."""

    @property
    def edited(self) -> bool:
        return len(self.revisions) > 1

    def to_api(self, team_id: str, app_id: str) -> Json:
        body: Json = {"type": "message", "text": self.text, "user": self.user, "ts": self.ts, "team": team_id}
        if self.blocks:
            body["blocks"] = self.blocks
        if self.bot_id:
            body |= {"bot_id": self.bot_id, "app_id": app_id}
        if self.thread_ts:
            body["thread_ts"] = self.thread_ts
        if self.replies:
            body |= {"thread_ts": self.ts, "reply_count": len(self.replies), "latest_reply": self.replies[-1]}
        if self.edited:
            body["edited"] = {"user": self.user, "ts": self.revisions[-1].at_ts}
        if self.metadata:
            body["metadata"] = self.metadata
        if self.files:
            body |= {"files": self.files, "upload": True}
        if self.reactions:
            body["reactions"] = [
                {"name": name, "users": users, "count": len(users)} for name, users in self.reactions.items()
            ]
        return body


@dataclass
class Ephemeral:
    """A message only `user` sees: chat.postEphemeral, an ack payload, or a response_url reply."""

    channel: str
    ts: str
    user: str
    text: str
    blocks: list[Json]
    source: str
    thread_ts: str = ""
    revisions: list[Revision] = field(default_factory=list)
    deleted: bool = False


@dataclass(frozen=True)
class Share:
    """Where a completed upload was posted: the message that carries it."""

    channel: str
    ts: str
    thread_ts: str = ""


@dataclass
class StoredFile:
    """One external upload: reserved by files.getUploadURLExternal, filled by the POST to its upload URL,
    shared by files.completeUploadExternal."""

    id: str
    name: str
    declared_length: int
    """The `length` the app announced; the bytes actually POSTed may differ and are what `size` reports."""
    user: str
    created: int
    ticket: str
    """The opaque last segment of the upload URL."""
    title: str = ""
    alt_txt: str = ""
    snippet_type: str = ""
    content: bytes | None = None
    completed: bool = False
    shares: list[Share] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.content or b"")


@dataclass(frozen=True)
class UserAction:
    """What a simulated user did: typed a command, clicked a button, wrote a message."""

    ts: str
    kind: str
    user: str
    channel: str
    detail: str


class TsClock:
    """Unique, increasing `"<seconds>.<6 digits>"` timestamps from wall time, as Slack issues them."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._last = 0

    def next(self) -> str:
        micros = max(self._last + 1, int(self._now() * 1_000_000))
        self._last = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


@dataclass(frozen=True)
class Team:
    """A workspace a user acts from: the emulated one, or another (a Slack Connect channel's external
    member, a sister workspace of an Enterprise Grid org). Slack user ids are unique only within one."""

    id: str
    domain: str
    enterprise_id: str = ""
    """The Enterprise Grid org the workspace belongs to; empty outside Grid."""
    enterprise_name: str = ""


@dataclass(frozen=True)
class Identity:
    team_id: str = "T_GPULAB"
    team_name: str = "GPU Lab"
    team_domain: str = "gpulab"
    app_id: str = "A_GPUBOT"
    bot_user_id: str = "U_GPUBOT"
    bot_id: str = "B_GPUBOT"
    bot_name: str = "gpubot"
    enterprise_id: str = ""
    """Set for a workspace inside an Enterprise Grid org: payloads and auth.test then name the org."""
    enterprise_name: str = ""

    def home(self) -> Team:
        """The emulated workspace as a `Team`: where its own users act from."""
        return Team(self.team_id, self.team_domain, self.enterprise_id, self.enterprise_name)


DEFAULT_USERS = (
    User("U_ALICE", "alice", "Alice Liddell"),
    User("U_BOB", "bob", "Bob Builder"),
    User("U_ADMIN", "admin", "Ada Admin", is_admin=True),
)
DEFAULT_CHANNELS = (("C_GPU", "gpu-users"), ("C_OPS", "gpu-ops"))


class Workspace:
    def __init__(
        self,
        *,
        identity: Identity,
        users: tuple[User, ...] = DEFAULT_USERS,
        channels: tuple[tuple[str, str], ...] = DEFAULT_CHANNELS,
        uninvited: frozenset[str] = frozenset(),
        clock: TsClock | None = None,
    ) -> None:
        self.identity = identity
        self.clock = clock or TsClock()
        bot = User(identity.bot_user_id, identity.bot_name, is_bot=True)
        self.users: dict[str, User] = {user.id: user for user in (*users, bot)}
        humans = {user.id for user in users}
        self.channels: dict[str, Channel] = {
            cid: Channel(cid, name, bot_member=cid not in uninvited, members=set(humans))
            for cid, name in channels
        }
        self.messages: dict[tuple[str, str], Message] = {}
        self.ephemerals: list[Ephemeral] = []
        self.actions: list[UserAction] = []
        self.files: dict[str, StoredFile] = {}
        self._listeners: list[Callable[[], None]] = []

    # -- change notification ---------------------------------------------------------------
    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def changed(self) -> None:
        for listener in self._listeners:
            listener()

    # -- lookups ---------------------------------------------------------------------------
    def channel_by_name(self, name: str) -> Channel | None:
        bare = name.removeprefix("#")
        return next((c for c in self.channels.values() if c.name == bare and not c.deleted), None)

    def resolve_channel(self, ref: str) -> Channel | None:
        """A channel id, a `#name`, or a user id (which means the DM with that user, opened on demand);
        None for a deleted channel, which the API no longer knows."""
        if ref in self.channels:
            return None if self.channels[ref].deleted else self.channels[ref]
        if ref in self.users and not self.users[ref].is_bot:
            return self.open_dm(ref)
        return self.channel_by_name(ref)

    def open_dm(self, user_id: str) -> Channel:
        dm_id = "D" + user_id.removeprefix("U")
        if dm_id not in self.channels:
            self.channels[dm_id] = Channel(dm_id, dm_id, is_im=True, im_user=user_id, members={user_id})
        return self.channels[dm_id]

    # -- writing ---------------------------------------------------------------------------
    def change_channel(
        self,
        channel_id: str,
        *,
        bot_member: bool | None = None,
        private: bool | None = None,
        archived: bool | None = None,
        deleted: bool | None = None,
    ) -> Channel:
        """What a workspace admin or member does to a channel: remove the bot (or invite it back), make it
        private, archive or unarchive it, delete it. LookupError for an unknown id."""
        channel = self.channels.get(channel_id)
        if channel is None or channel.is_im:
            raise LookupError(f"no channel {channel_id!r}")
        if bot_member is not None:
            channel.bot_member = bot_member
        if private is not None:
            channel.private = private
        if archived is not None:
            channel.archived = archived
        if deleted is not None:
            channel.deleted = deleted
        self.changed()
        return channel

    def post(self, message: Message) -> Message:
        message.revisions.append(Revision(message.text, message.blocks, message.ts))
        self.messages[(message.channel, message.ts)] = message
        parent = self.messages.get((message.channel, message.thread_ts)) if message.thread_ts else None
        if parent is not None:
            parent.replies.append(message.ts)
        self.changed()
        return message

    def edit(self, message: Message, *, text: str, blocks: list[Json]) -> None:
        message.text, message.blocks = text, blocks
        message.revisions.append(Revision(text, blocks, self.clock.next()))
        self.changed()

    def add_ephemeral(self, ephemeral: Ephemeral) -> Ephemeral:
        ephemeral.revisions.append(Revision(ephemeral.text, ephemeral.blocks, ephemeral.ts))
        self.ephemerals.append(ephemeral)
        self.changed()
        return ephemeral

    def edit_ephemeral(self, ephemeral: Ephemeral) -> None:
        ephemeral.revisions.append(Revision(ephemeral.text, ephemeral.blocks, self.clock.next()))
        self.changed()

    def record_action(self, *, kind: str, user: str, channel: str, detail: str) -> UserAction:
        action = UserAction(self.clock.next(), kind, user, channel, detail)
        self.actions.append(action)
        self.changed()
        return action

    def find_ephemeral(self, channel: str, ts: str) -> Ephemeral | None:
        return next((e for e in self.ephemerals if e.channel == channel and e.ts == ts), None)

    def thread_of(self, channel: str, ts: str) -> list[Message]:
        parent = self.messages.get((channel, ts))
        if parent is None:
            return []
        replies = [self.messages[(channel, reply)] for reply in parent.replies]
        return [parent, *(reply for reply in replies if not reply.deleted)]

    def history(self, channel: str) -> list[Message]:
        """Top-level messages (and broadcast replies), newest first, as conversations.history lists them."""
        listed = [
            m
            for (cid, _), m in self.messages.items()
            if cid == channel
            and not m.deleted
            and (not m.thread_ts or m.reply_broadcast or m.thread_ts == m.ts)
        ]
        return sorted(listed, key=lambda m: m.ts, reverse=True)

    # -- reading back ----------------------------------------------------------------------
    def snapshot(self) -> Json:
        return {
            "team": {"id": self.identity.team_id, "name": self.identity.team_name},
            "users": [asdict(user) for user in self.users.values()],
            "channels": [self._channel_snapshot(channel) for channel in self.channels.values()],
            "ephemerals": [_ephemeral_snapshot(e, self.users) for e in self.ephemerals],
            "actions": [asdict(action) for action in self.actions],
            "files": [_file_snapshot(f) for f in self.files.values()],
        }

    def _channel_snapshot(self, channel: Channel) -> Json:
        messages = sorted(
            (m for (cid, _), m in self.messages.items() if cid == channel.id), key=lambda m: m.ts
        )
        return {
            "id": channel.id,
            "name": channel.name,
            "is_im": channel.is_im,
            "user": channel.im_user,
            "is_member": channel.bot_member,
            "is_private": channel.private,
            "is_archived": channel.archived,
            "deleted": channel.deleted,
            "messages": [self._message_snapshot(m) for m in messages],
        }

    def _message_snapshot(self, message: Message) -> Json:
        author = self.users.get(message.user)
        return {
            "channel": message.channel,
            "ts": message.ts,
            "thread_ts": message.thread_ts,
            "user": message.user,
            "username": author.name if author else message.user,
            "bot_id": message.bot_id,
            "text": message.text,
            "blocks": message.blocks,
            "edited": message.edited,
            "revisions": [asdict(r) for r in message.revisions],
            "deleted": message.deleted,
            "reply_count": len(message.replies),
            "metadata": message.metadata,
            "reactions": {name: list(users) for name, users in message.reactions.items()},
            "files": [
                {key: shared.get(key) for key in ("id", "name", "title", "size", "mimetype", "filetype")}
                for shared in message.files
            ],
        }


def _file_snapshot(stored: StoredFile) -> Json:
    """The file without its bytes (read those with `BackgroundSlack.file_content`)."""
    return {
        "id": stored.id,
        "name": stored.name,
        "title": stored.title,
        "size": stored.size,
        "declared_length": stored.declared_length,
        "uploaded": stored.content is not None,
        "completed": stored.completed,
        "user": stored.user,
        "shares": [asdict(share) for share in stored.shares],
    }


def _ephemeral_snapshot(ephemeral: Ephemeral, users: dict[str, User]) -> Json:
    target = users.get(ephemeral.user)
    return {
        "channel": ephemeral.channel,
        "message_ts": ephemeral.ts,
        "user": ephemeral.user,
        "username": target.name if target else ephemeral.user,
        "text": ephemeral.text,
        "blocks": ephemeral.blocks,
        "thread_ts": ephemeral.thread_ts,
        "source": ephemeral.source,
        "revisions": [asdict(r) for r in ephemeral.revisions],
        "deleted": ephemeral.deleted,
    }
