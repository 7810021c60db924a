"""Adapter: the one path to Slack's Web API, so limits, retries, ordering and coalescing live in one place.

A single worker thread drains per-lane FIFO queues. A lane is what must stay in order: the messages of one
channel (thread replies included), the edits of one message, the ephemerals of one channel, one user's DMs.
The worker sends the lane whose head may go soonest, pacing each channel's chat.postMessage (Slack allows
about one a second) and each tiered method against its per-minute budget. A 429 pauses that bucket for
Retry-After; a 5xx or connection error pauses the lane with capped exponential back-off; either way the
same job is retried at the head of its lane, so nothing is dropped or reordered. Only errors that retrying
cannot fix (`Invalid`, `NotFound`, `Unreachable`) drop a job, logged and counted; a caller that waits
(`post`, `post_dm`) gets the error and may reach the person another way. Edits of a message that have not been
sent yet collapse into the newest.

A file upload (`upload`, a text file in a user's DM) is a job of that user's DM lane too: it reuses the DM
channel conversations.open gave, comes after the DMs queued before it, and is paced and retried like any
write. files_upload_v2 makes three requests (files.getUploadURLExternal, the POST of the bytes to the URL it
gives, files.completeUploadExternal); a failure in any retries the whole job, with a fresh upload URL, since
Slack forgets an upload never completed. The worker sends the bytes itself: gpubot's files are at most a
pod's log read (1 MiB), a moment's work for Slack, while a second sender would split the one place where
pacing and Retry-After are kept.

slack_sdk's own retry handlers must be off (`make_client` does that): with them on, a 429 or connection
error would be retried twice over, once inside the call and again here.

With a journal (`outbox_journal`), every queued write (reply, edit, ephemeral, DM) is kept in the store
before the caller returns and dropped once Slack has it, so a killed bot's unsent writes are sent by its
next run, or by another replica. A replayed reply or DM may have reached Slack just before the kill: it
carries its key in the message's metadata, and its thread (or DM) is read first, once per replay, so a
message found there is not posted again. A replayed edit older than one this run made is dropped (the
newer edit wins, as it would have); an ephemeral cannot be read back, so a replayed one is sent again,
which at worst shows it twice. The writes a caller waits for (`post`, `post_dm`, `upload`) are not kept:
their callers keep their own journals (the run journal, the reaper's, the episode's message) and would
send them a second time.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import http.client
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError

from bot.adapters import outbox_journal
from bot.core import backoff, errors

logger = logging.getLogger(__name__)

Block = dict[str, Any]
Kind = Literal["post", "update", "ephemeral", "dm", "upload", "publish"]
Lane = tuple[str, ...]

IN_FLIGHT_CHECK_SECONDS = 0.05
"""How often a caller past its deadline looks again at a write that was on the wire at the deadline."""
POST_MESSAGE = "chat.postMessage"
REPLIES = "conversations.replies"
HISTORY = "conversations.history"
UPLOAD = "files.getUploadURLExternal"
PUBLISH = "views.publish"
TIER_PER_MINUTE: Mapping[str, int] = {
    "chat.update": 50,
    "chat.postEphemeral": 100,
    "conversations.open": 50,
    UPLOAD: 100,
    PUBLISH: 100,
    REPLIES: 50,
    HISTORY: 50,
}
"""Slack's documented floors (Tier 3 = 50+/min, Tier 4 = 100+/min) per method per workspace. An upload's
budget is files.getUploadURLExternal's, Tier 4 (docs.slack.dev/reference/methods/files.getUploadURLExternal);
files.completeUploadExternal is Tier 4 too (…/files.completeUploadExternal) and is called exactly once per
upload, so the one bucket paces both. views.publish is Tier 4 too (…/views.publish). conversations.replies
and conversations.history are Tier 3 for an app built for its own workspace (…/conversations.replies); they
are read only when a replayed write is looked for."""
NOT_FOUND_ERRORS = frozenset({"message_not_found", "user_not_found", "thread_not_found"})
UNREACHABLE_ERRORS: Mapping[str, errors.Why] = {
    "not_in_channel": "not-member",
    "is_archived": "archived",
    "is_inactive": "archived",
    "channel_not_found": "gone",
}
"""Slack's refusals of a channel itself, as its method references name them: chat.postMessage and
chat.postEphemeral answer `not_in_channel`, `is_archived` ("Channel has been archived.") and
`channel_not_found` (also for a private channel the bot is not in); chat.update answers `is_inactive` in
an archived channel (docs.slack.dev/reference/methods/chat.postMessage, …/chat.update)."""
SERVER_ERRORS = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
METHOD_OF: Mapping[Kind, str] = {
    "update": "chat.update",
    "ephemeral": "chat.postEphemeral",
    "publish": PUBLISH,
}
"""The Web API method of the kinds that make one call, and so are paced by that method's budget alone."""
JOURNALED: Mapping[str, Kind] = {"post": "post", "update": "update", "ephemeral": "ephemeral", "dm": "dm"}
"""Queued writes the journal keeps, by name; a waited-for `post` or `dm` is not: its caller has the answer."""
READ_PAGES = 5
READ_PAGE_SIZE = 200
"""A replay reads at most this much of a thread or DM (1,000 messages): a write queued before a kill is
among the newest there."""
EDITS_REMEMBERED = 10_000
"""Messages whose last edit time this run remembers, to drop a replayed edit older than its own."""


@dataclass(frozen=True)
class OutboxSettings:
    channel_messages_per_second: float = 1.0
    """chat.postMessage pace per channel; Slack documents about one message a second per channel."""
    channel_message_burst: int = 3
    """Messages a quiet channel may take at once; Slack tolerates short bursts, but not long ones."""
    method_per_minute: Mapping[str, int] = field(default_factory=lambda: dict(TIER_PER_MINUTE))
    """Budget per tiered method; a full minute's budget may go in a burst, as Slack allows."""
    backoff_initial_seconds: float = 0.5
    """First pause of a lane after a 5xx or connection error; doubles per consecutive failure."""
    backoff_max_seconds: float = 30.0
    """Longest pause between retries: spares a struggling Slack, yet notices its recovery quickly."""
    default_retry_after_seconds: float = 1.0
    """Used when a 429 comes without a usable Retry-After header."""
    post_timeout_seconds: float = 60.0
    """How long `post` waits for its message by default, retries included."""
    stop_timeout_seconds: float = 10.0
    """How long `stop` lets the worker drain the queue before giving up on what is left."""


@dataclass(frozen=True)
class OutboxCounters:
    sent: int = 0
    """Successful Web API calls."""
    retried: int = 0
    """Failed attempts that will be tried again (429s included)."""
    rate_limited: int = 0
    """429 answers."""
    coalesced: int = 0
    """Edits replaced by a newer edit of the same message before they were sent."""
    failed: int = 0
    """Jobs dropped because Slack refused them for good (bad request, unknown channel or message)."""
    replayed: int = 0
    """Unsent writes of a stopped run (this replica's earlier run, or a gone replica's) queued again."""
    found_sent: int = 0
    """Replayed messages found in Slack already (sent just before the kill), so not posted again."""


def make_client(token: str, *, base_url: str = "https://slack.com/api/", timeout: int = 30) -> WebClient:
    """A WebClient for the outbox: slack_sdk's own retries off, since the outbox does them."""
    return WebClient(token=token, base_url=base_url, timeout=timeout, retry_handlers=[])


def convert(err: Exception) -> errors.GpubotError:
    """Map a slack_sdk or transport failure onto the taxonomy, carrying Retry-After for 429s."""
    if not isinstance(err, SlackApiError):
        return errors.ChatUnavailable(f"Slack unreachable: {err}")
    status = int(getattr(err.response, "status_code", 0) or 0)
    code = _error_code(err)
    if status == 429 or code == "ratelimited":
        return errors.RateLimited(
            f"Slack: {code or 'ratelimited'}",
            retry_after=backoff.retry_after(getattr(err.response, "headers", None)),
        )
    if status >= 500 or code in SERVER_ERRORS:
        return errors.ChatUnavailable(f"Slack: {code or f'HTTP {status}'}")
    if code in UNREACHABLE_ERRORS:
        return errors.Unreachable(f"Slack: {code}", why=UNREACHABLE_ERRORS[code])
    if code in NOT_FOUND_ERRORS:
        return errors.NotFound(f"Slack: {code}")
    return errors.Invalid(f"Slack: {code or f'HTTP {status}'}")


def _error_code(err: SlackApiError) -> str:
    data = getattr(err.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""


TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    OSError,  # URLError, refused and reset connections, timeouts
    http.client.HTTPException,
    json.JSONDecodeError,  # an HTML error page from a proxy in front of Slack
)


# -- pacing -----------------------------------------------------------------------------------------


@dataclass
class Bucket:
    """A token bucket with a hard pause, for one method (or one channel's chat.postMessage)."""

    capacity: float
    per_second: float
    tokens: float
    updated: float
    paused_until: float = 0.0

    def ready_at(self, now: float) -> float:
        tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second)
        refill = now if tokens >= 1 else now + (1 - tokens) / self.per_second
        return max(refill, self.paused_until)

    def take(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second) - 1
        self.updated = now

    def pause(self, until: float) -> None:
        self.paused_until = max(self.paused_until, until)


@dataclass
class Job:
    kind: Kind
    lane: Lane
    seq: int
    args: dict[str, Any]
    """The Web API arguments; for a DM, `channel` is filled in once conversations.open answered."""
    result: Future[str] | None = None
    """Set for blocking posts: resolved with the message ts, or failed with a taxonomy error."""
    in_flight: bool = False
    failures: int = 0
    key: str = ""
    """The idempotency key of a journaled write; '' when not journaled."""
    held: bool = False
    """Not sendable yet: the journal is still writing it down."""
    verify: bool = False
    """A replayed message that may have reached Slack before the kill: look for its key there first."""
    batch: int = 0
    """The replay it came from: one read of each thread serves a whole replay."""


# -- the outbox -------------------------------------------------------------------------------------


class SlackOutbox:
    def __init__(
        self,
        client: WebClient,
        settings: OutboxSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        journal: outbox_journal.OutboxJournal | None = None,
    ) -> None:
        """`journal`: keep queued writes in the store until sent, and replay a stopped run's (see above)."""
        if client.retry_handlers:
            raise ValueError("the outbox retries itself: build the WebClient with retry_handlers=[]")
        self._client = client
        self._settings = settings or OutboxSettings()
        self._clock = clock
        self._cond = threading.Condition()
        self._lanes: dict[Lane, collections.deque[Job]] = {}
        self._lane_paused_until: dict[Lane, float] = {}
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._dm_channels: dict[str, str] = {}
        self._seq = itertools.count()
        self._counts: collections.Counter[str] = collections.Counter()
        self._stopping = False
        self._abandoned = False
        self._journal = journal
        self._batches = itertools.count(1)
        self._found: dict[tuple[int, str, str], dict[str, str]] = {}
        """(replay, channel, thread ts or '') → the keys of gpubot's messages read there, to their ts."""
        self._edited: collections.OrderedDict[Lane, float] = collections.OrderedDict()
        """An edit lane → wall-clock time of this run's last edit sent in it."""
        self._worker = threading.Thread(target=self._run, name="slack-outbox", daemon=True)
        self._worker.start()
        if journal is not None:
            journal.start(on_beat=self.replay)
            self.replay()

    # -- writing --------------------------------------------------------------------------------
    def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        """views.open, now and once: a trigger id is good for 3 seconds, so it never waits in the queue
        (docs.slack.dev/reference/methods/views.open: `expired_trigger_id`)."""
        try:
            self._client.views_open(trigger_id=trigger_id, view=view)
        except Exception as err:  # slack_sdk's and the transport's, converted at this edge
            raise convert(err) from err

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[Block] | None = None,
        *,
        thread_ts: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Post and wait until Slack has it; return its ts (usable as `thread_ts`).

        Raises the taxonomy error Slack gave for good (`Invalid`, `NotFound`), or `Unavailable` when the
        message could not go out within `timeout` seconds (it is then withdrawn, never sent late).
        """
        args = _message(channel, text, blocks, thread_ts)
        return self._wait("post", ("chat", channel), args, timeout, f"Slack post to {channel}")

    def reply(self, channel: str, thread_ts: str, text: str, blocks: list[Block] | None = None) -> None:
        """Queue a reply in a thread, after every earlier write to that channel."""
        self._enqueue("post", ("chat", channel), _message(channel, text, blocks, thread_ts))

    def update(self, channel: str, ts: str, text: str, blocks: list[Block] | None = None) -> None:
        """Queue an edit; an unsent earlier edit of the same message is replaced by this one."""
        args = {"channel": channel, "ts": ts, "text": text, "blocks": blocks or []}
        self._enqueue("update", ("update", channel, ts), args, coalesce=True)

    def ephemeral(
        self, channel: str, user: str, text: str, blocks: list[Block] | None = None, *, thread_ts: str = ""
    ) -> None:
        """Queue a message only `user` sees in `channel`."""
        args = {**_message(channel, text, blocks, thread_ts or None), "user": user}
        self._enqueue("ephemeral", ("ephemeral", channel), args)

    def dm(self, user: str, text: str, blocks: list[Block] | None = None) -> None:
        """Queue a direct message: conversations.open (once per user), then chat.postMessage."""
        args = {**_message("", text, blocks, None), "user": user}
        self._enqueue("dm", ("dm", user), args)

    def post_dm(
        self, user: str, text: str, blocks: list[Block] | None = None, *, timeout: float | None = None
    ) -> str:
        """A direct message, in order after the user's queued ones, waited for as `post` waits."""
        args = {**_message("", text, blocks, None), "user": user}
        return self._wait("dm", ("dm", user), args, timeout, f"Slack DM to {user}")

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        """A text file in `user`'s DM, with `comment` (mrkdwn) as its message, in order after the user's
        queued DMs and waited for as `post` waits; returns the file's id."""
        args = {"user": user, "filename": filename, "title": filename, "content": content, "comment": comment}
        return self._wait("upload", ("dm", user), args, timeout, f"Slack file to {user}")

    def publish(self, user: str, view: dict[str, Any]) -> None:
        """Queue `user`'s App Home view; an unsent earlier one of theirs is replaced: only the last shows."""
        self._enqueue("publish", ("home", user), {"user_id": user, "view": view}, coalesce=True)

    # -- watching and stopping ------------------------------------------------------------------
    @property
    def settings(self) -> OutboxSettings:
        return self._settings

    def depth(self) -> int:
        """Jobs waiting or in flight."""
        with self._cond:
            return sum(len(queue) for queue in self._lanes.values())

    def counters(self) -> OutboxCounters:
        with self._cond:
            return OutboxCounters(
                **{f.name: self._counts[f.name] for f in dataclasses.fields(OutboxCounters)}
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is sent (or dropped); False if `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._lanes, timeout=timeout)

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new writes, let the worker drain the queue for up to `timeout` seconds, then end it."""
        wait = self._settings.stop_timeout_seconds if timeout is None else timeout
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._worker.join(wait)
        with self._cond:
            self._abandoned = True
            self._cond.notify_all()
        if self._journal is not None:
            self._journal.stop()
        left = self.depth()
        if left:
            kept = " (kept in the store for the next run)" if self._journal is not None else ""
            logger.warning("Slack outbox stopped with %s writes unsent%s", left, kept)

    # -- queueing -------------------------------------------------------------------------------
    def _enqueue(
        self,
        kind: Kind,
        lane: Lane,
        args: dict[str, Any],
        result: Future[str] | None = None,
        *,
        coalesce: bool = False,
    ) -> Job:
        """Append a job to its lane; with `coalesce`, overwrite the lane's unsent last job instead. A
        journaled write is kept in the store before this returns, and is not sent before it is kept."""
        journal = self._journal if result is None and kind in JOURNALED else None
        key = journal.new_key() if journal is not None else ""
        if key and kind in ("post", "dm"):
            args = {**args, "metadata": outbox_journal.metadata(key)}
        with self._cond:
            if self._stopping:
                raise errors.ChatUnavailable("the Slack outbox is stopped")
            queue = self._lanes.setdefault(lane, collections.deque())
            if coalesce and queue and not queue[-1].in_flight:
                job = queue[-1]
                job.args = args
                # Held again until the journal has the new args: sent before that, its entry would be
                # forgotten first and then kept again, and stay in the journal though Slack has it.
                job.held = bool(journal is not None and job.key)
                self._counts["coalesced"] += 1
            else:
                job = Job(kind, lane, next(self._seq), args, result, key=key, held=bool(key))
                queue.append(job)
                self._cond.notify_all()
        if journal is not None and job.key:
            journal.keep(job.key, kind, lane, args)
            with self._cond:  # the journal has it: the worker may send it
                job.held = False
                self._cond.notify_all()
        return job

    # -- replaying a stopped run's writes ---------------------------------------------------------
    def replay(self) -> int:
        """Queue again the journaled writes no live run sends: this replica's from before a restart and
        those of a gone replica. Returns how many were queued."""
        if self._journal is None:
            return 0
        with self._cond:  # reads of earlier replays are done with once none of their jobs is left
            live = {job.batch for queue in self._lanes.values() for job in queue if job.verify}
            self._found = {where: keys for where, keys in self._found.items() if where[0] in live}
        batch = next(self._batches)
        queued = 0
        for entry in self._journal.left_over():
            try:
                queued += self._requeue(entry, batch)
            except errors.ChatUnavailable:  # stopping: the entries stay kept for the next run
                return queued
        if queued:
            logger.info("outbox: %s unsent Slack writes of a stopped run queued again", queued)
        return queued

    def _requeue(self, entry: outbox_journal.Entry, batch: int) -> int:
        kind = JOURNALED.get(entry.kind)
        if kind is None:
            self._forget(entry.key)
            return 0
        lane = entry.lane
        with self._cond:
            if self._stopping:
                raise errors.ChatUnavailable("the Slack outbox is stopped")
            dropped = self._superseded(kind, entry, batch)
            if dropped is None:
                verify = kind in ("post", "dm")
                job = Job(kind, lane, next(self._seq), entry.args, key=entry.key, verify=verify, batch=batch)
                self._lanes.setdefault(lane, collections.deque()).append(job)
                self._counts["replayed"] += 1
                self._cond.notify_all()
        if dropped is not None:
            self._forget(dropped)
            return 0
        return 1

    def _superseded(self, kind: Kind, entry: outbox_journal.Entry, batch: int) -> str | None:
        """For a replayed edit, the key of the edit it makes needless: itself when this run has edited the
        message since (or has an edit of it queued), the older replayed edit it replaces; None when it is
        simply queued. Entries come oldest first. Caller holds the lock."""
        if kind != "update":
            return None
        if self._edited.get(entry.lane, 0.0) > entry.at:
            return entry.key
        queue = self._lanes.get(entry.lane)
        if not queue:
            return None
        last = queue[-1]
        if last.batch != batch or last.in_flight:
            return entry.key
        older, last.key, last.args = last.key, entry.key, entry.args
        self._counts["coalesced"] += 1
        return older

    def _forget(self, key: str) -> None:
        if self._journal is not None and key:
            self._journal.forget(key)

    def _wait(self, kind: Kind, lane: Lane, args: dict[str, Any], timeout: float | None, what: str) -> str:
        """Queue a write and wait for Slack's answer, as `post` says; never journaled: the caller has it."""
        result: Future[str] = Future()
        job = self._enqueue(kind, lane, args, result)
        wait = self._settings.post_timeout_seconds if timeout is None else timeout
        try:
            return result.result(timeout=wait)
        except TimeoutError:
            pass
        # On the wire at the deadline: wait for that attempt's answer only. Sent, it is returned; refused
        # for now, it would be retried later, so it is withdrawn like one that never left the queue.
        while not self._withdraw(job):
            with contextlib.suppress(TimeoutError):
                return result.result(timeout=IN_FLIGHT_CHECK_SECONDS)
        raise errors.ChatUnavailable(f"{what} not sent within {wait} s")

    def _withdraw(self, job: Job) -> bool:
        with self._cond:
            if job.in_flight or job.result is None or job.result.done():
                return False
            self._finish(job)
            return True

    def _finish(self, job: Job) -> None:
        """Take a job off its lane and wake waiters; caller holds the lock."""
        queue = self._lanes[job.lane]
        queue.remove(job)
        if not queue:
            del self._lanes[job.lane]
            self._lane_paused_until.pop(job.lane, None)
        self._cond.notify_all()

    # -- the worker -----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                return
            self._attempt(job)

    def _next_job(self) -> Job | None:
        """Block until some lane's head may go; None once stopping with nothing left, or abandoned."""
        with self._cond:
            while True:
                if self._abandoned or (self._stopping and not self._lanes):
                    return None
                now = self._clock()
                best: tuple[float, int, Job] | None = None
                for queue in self._lanes.values():
                    head = queue[0]
                    if head.held:
                        continue
                    paused = self._lane_paused_until.get(head.lane, 0.0)
                    ready = max(paused, self._bucket_of(head).ready_at(now))
                    if best is None or (ready, head.seq) < best[:2]:
                        best = (ready, head.seq, head)
                if best is not None and best[0] <= now:
                    job = best[2]
                    self._bucket_of(job).take(now)
                    job.in_flight = True
                    return job
                self._cond.wait(None if best is None else best[0] - now)

    def _attempt(self, job: Job) -> None:
        try:
            ts = self._send(job)
        except Exception as exc:  # everything is converted below; the worker must survive any failure
            self._on_failure(job, exc if isinstance(exc, errors.GpubotError) else _convert_any(exc))
            return
        # Forgotten before the job is finished, so a flush that returns has nothing of it left kept (the
        # key is fixed while the job is in flight: nothing coalesces into a job on the wire).
        self._forget(job.key)
        with self._cond:
            job.in_flight = False
            self._counts["sent"] += 1
            self._finish(job)
            if job.result is not None:
                job.result.set_result(ts)
            if job.kind == "update":
                self._remember_edit(job.lane)

    def _remember_edit(self, lane: Lane) -> None:
        """Caller holds the lock."""
        self._edited[lane] = time.time()
        self._edited.move_to_end(lane)
        if len(self._edited) > EDITS_REMEMBERED:
            self._edited.popitem(last=False)

    def _send(self, job: Job) -> str:
        """One Web API call (two for a DM's first message); returns the ts Slack gave."""
        if job.kind == "update":
            return str(self._client.chat_update(**job.args)["ts"])
        if job.kind == "ephemeral":
            return str(self._client.chat_postEphemeral(**job.args)["message_ts"])
        if job.kind == "upload":
            return self._send_upload(job)
        if job.kind == "publish":
            return str(self._client.views_publish(**job.args)["view"]["id"])
        args = dict(job.args)
        if job.kind == "dm":
            args["channel"] = self._dm_channel(args.pop("user"), then=HISTORY if job.verify else POST_MESSAGE)
        if job.verify and (ts := self._sent_before(job, str(args["channel"]), args.get("thread_ts"))):
            return ts
        return str(self._client.chat_postMessage(**args)["ts"])

    def _sent_before(self, job: Job, channel: str, thread_ts: str | None) -> str:
        """The ts of this replayed message if Slack has it already; read once per thread and replay. The job
        was picked on the read's budget, and pays chat.postMessage's as well."""
        where = (job.batch, channel, thread_ts or "")
        found = self._found.get(where)
        if found is None:
            found = self._read_or_nothing(channel, thread_ts)
            with self._cond:
                self._found[where] = found
                self._counts["sent"] += 1
                self._bucket(POST_MESSAGE, channel).take(self._clock())
        job.verify = False
        ts = found.get(job.key, "")
        if ts:
            with self._cond:
                self._counts["found_sent"] += 1
            logger.info(
                "outbox: a replayed message to %s was sent before the restart; not sent again", channel
            )
        return ts

    def _read_or_nothing(self, channel: str, thread_ts: str | None) -> dict[str, str]:
        """The keys read, or none when Slack will not let us read there (an app installed without the
        history scopes: `missing_scope`): the message is then sent again rather than lost."""
        try:
            return self._read_keys(channel, thread_ts)
        except SlackApiError as err:
            failure = convert(err)
            if isinstance(failure, errors.RateLimited | errors.Unavailable | errors.Unreachable):
                raise  # retried, or dropped as the post itself would be
            logger.warning(
                "outbox: cannot read %s to look for a replayed message (%s); sending it", channel, failure
            )
            return {}

    def _read_keys(self, channel: str, thread_ts: str | None) -> dict[str, str]:
        """gpubot's journaled messages in a thread (conversations.replies) or a DM (conversations.history),
        newest pages first, with their metadata (`include_all_metadata`, off by default)."""
        found: dict[str, str] = {}
        page: dict[str, Any] = {"channel": channel, "include_all_metadata": True, "limit": READ_PAGE_SIZE}
        for _ in range(READ_PAGES):
            if thread_ts:
                answer = self._client.conversations_replies(ts=thread_ts, **page)
            else:
                answer = self._client.conversations_history(**page)
            for message in answer.get("messages") or []:
                if key := outbox_journal.key_of(message):
                    found[key] = str(message.get("ts", ""))
            page["cursor"] = str((answer.get("response_metadata") or {}).get("next_cursor") or "")
            if not page["cursor"]:
                break
        return found

    def _send_upload(self, job: Job) -> str:
        args = job.args
        channel = self._dm_channel(str(args["user"]), then=UPLOAD)
        try:
            answer = self._client.files_upload_v2(
                channel=channel,
                content=args["content"],
                filename=args["filename"],
                title=args["title"],
                initial_comment=args["comment"],
            )
        except SlackRequestError as err:  # the upload URL answered other than 200: try again, afresh
            raise errors.ChatUnavailable(f"Slack refused the file's bytes: {err}") from err
        return str(answer["file"]["id"])

    def _dm_channel(self, user: str, *, then: str) -> str:
        """The user's DM channel: opened once with conversations.open, then remembered. A job that opens it
        was picked on conversations.open's budget, and pays `then`'s (the method that follows) as well."""
        channel = self._dm_channels.get(user)
        if channel is None:
            opened = self._client.conversations_open(users=user)
            channel = str(opened["channel"]["id"])
            with self._cond:
                self._dm_channels[user] = channel
                self._counts["sent"] += 1
                self._bucket(then, channel if then == POST_MESSAGE else "").take(self._clock())
        return channel

    def _on_failure(self, job: Job, err: errors.GpubotError) -> None:
        if not isinstance(err, errors.RateLimited | errors.Unavailable):
            self._forget(job.key)  # refused for good: forgotten before the job is finished, as when sent
        with self._cond:
            job.in_flight = False
            if isinstance(err, errors.RateLimited | errors.Unavailable):
                self._schedule_retry(job, err)
                return
            self._counts["failed"] += 1
            self._finish(job)
            if job.result is not None:
                job.result.set_exception(err)
        logger.error("Slack refused %s to %s for good: %s", job.kind, _target(job), err)

    def _schedule_retry(self, job: Job, err: errors.GpubotError) -> None:
        """Keep the job at its lane's head and pause what the failure says to pause; caller holds the lock."""
        now = self._clock()
        job.failures += 1
        self._counts["retried"] += 1
        if isinstance(err, errors.RateLimited):
            self._counts["rate_limited"] += 1
            retry_after = err.retry_after or self._settings.default_retry_after_seconds
            self._bucket_of(job).pause(now + retry_after)
            delay = retry_after
        else:
            delay = backoff.exponential(
                self._settings.backoff_initial_seconds, self._settings.backoff_max_seconds, job.failures
            )
            self._lane_paused_until[job.lane] = now + delay
        level = logging.WARNING if job.failures % 5 == 0 else logging.INFO
        logger.log(
            level,
            "Slack %s to %s failed (%s, try %s); retrying in %.1f s",
            job.kind,
            _target(job),
            err,
            job.failures,
            delay,
        )

    # -- budgets --------------------------------------------------------------------------------
    def _bucket_of(self, job: Job) -> Bucket:
        """The budget the job's next call is paced by."""
        if job.kind in METHOD_OF:
            return self._bucket(METHOD_OF[job.kind], "")
        if job.kind in ("dm", "upload"):
            channel = self._dm_channels.get(str(job.args["user"]))
            if not channel:
                return self._bucket("conversations.open", "")
            if job.verify and (job.batch, channel, "") not in self._found:
                return self._bucket(HISTORY, "")
            return self._bucket(POST_MESSAGE, channel) if job.kind == "dm" else self._bucket(UPLOAD, "")
        channel = str(job.args["channel"])
        if job.verify and (job.batch, channel, str(job.args.get("thread_ts") or "")) not in self._found:
            return self._bucket(REPLIES, "")
        return self._bucket(POST_MESSAGE, channel)

    def _bucket(self, method: str, channel: str) -> Bucket:
        key = (method, channel)
        bucket = self._buckets.get(key)
        if bucket is None:
            if method == POST_MESSAGE:
                capacity = float(self._settings.channel_message_burst)
                per_second = self._settings.channel_messages_per_second
            else:
                capacity = float(self._settings.method_per_minute.get(method, 50))
                per_second = capacity / 60.0
            bucket = self._buckets[key] = Bucket(capacity, per_second, capacity, self._clock())
        return bucket


def _message(channel: str, text: str, blocks: list[Block] | None, thread_ts: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"channel": channel, "text": text}
    if blocks:
        args["blocks"] = blocks
    if thread_ts:
        args["thread_ts"] = thread_ts
    return args


def _convert_any(exc: Exception) -> errors.GpubotError:
    """Slack and transport failures by the taxonomy; anything else is a bug, which retrying cannot fix."""
    if isinstance(exc, (SlackApiError, *TRANSPORT_ERRORS)):
        return convert(exc)
    logger.error("unexpected %s talking to Slack", type(exc).__name__, exc_info=exc)
    return errors.Invalid(f"unexpected {type(exc).__name__}: {exc}")


def _target(job: Job) -> str:
    where = str(job.args.get("channel") or job.args.get("user") or job.args.get("user_id") or "?")
    return f"{where} thread {job.args['thread_ts']}" if job.args.get("thread_ts") else where
