"""API server faults a test or `gpubot sim` user switches on: 5xx answers, held requests, lost watches, 410s.

What a real control plane does on a bad day (an etcd leader election, an overloaded apiserver, a load
balancer cutting long connections, a watch cache that falls behind), so clients must prove they retry,
resume and relist. Draws come from one seeded generator, so a run meets the same sequence of faults; which
request meets which draw follows the order requests arrive in (`every` fails each Nth request instead, for
a test that must meet each kind whatever the order). Periodic watch faults follow simulated time,
so a scenario meets them at the same points of its story however fast the machine runs it. A held request
waits in wall seconds, since that is what a client's timeout measures.

Switched at run time with `POST /simctl/v1/faults/api` (the fields of `ApiFaultConfig`, plus
`{"watches": "drop" | "gone"}` to end every open watch now), read back with `GET /simctl/v1/faults/api`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from sim.clock import Timer
from sim.cluster import errors
from sim.cluster.store import Store, Watcher

logger = logging.getLogger(__name__)

Ending = Literal["drop", "gone"]
WATCH_ENDINGS: tuple[Ending, ...] = ("drop", "gone")
LONG_RUNNING_VERBS = frozenset({"watch"})
"""The apiserver's timeout filter exempts long-running requests; a held watch is just a quiet one."""


@dataclass(frozen=True)
class ApiFaultConfig:
    error_rate: float = 0.0
    """Share of matching requests answered 500 or 503 (a Status body) before anything is done."""
    timeout_rate: float = 0.0
    """Share of matching requests held `hold_seconds`, then answered 504 as the apiserver's timeout
    filter does; a client whose own timeout is shorter gives up first."""
    statuses: tuple[int, ...] = (500, 503)
    """What an error answers with, drawn evenly."""
    verbs: frozenset[str] = frozenset()
    """The apiserver verbs faults apply to (get, list, watch, create, update, patch, delete, ...);
    empty means all of them."""
    resources: frozenset[str] = frozenset()
    """Plurals faults apply to (`pods`, `leases`, `pods/status`); empty means all of them."""
    committed_timeouts: float = 0.5
    """Share of held writes carried out before they are held: the answer is lost, the write is not.
    That is the case that tests a client's retries (a second create meets AlreadyExists)."""
    hold_seconds: float = 60.0
    """Wall seconds a held request waits for its 504; the apiserver's --request-timeout is 1 min."""
    drop_watches_every: float = 0.0
    """Simulated seconds between cutting every open watch mid-stream (no final chunk); 0 is never."""
    gone_every: float = 0.0
    """Simulated seconds between ending every open watch with an ERROR event of code 410 and compacting
    the history, so a resume from any earlier version is refused too and clients must relist; 0 is never."""
    seed: int = 0
    every: int = 0
    """When set, exactly every Nth matching request fails instead of `error_rate` and `timeout_rate` at
    random: in turn each of `statuses`, then a held request (every other one carried out). A test then
    meets every kind of fault at a known share, however its requests interleave."""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ApiFaultConfig:
        """The config a control request asks for; unknown fields are refused, not ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(body) - names)
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(unknown)}")
        fields: dict[str, Any] = dict(body)
        for name in ("verbs", "resources"):
            if name in fields:
                fields[name] = frozenset(str(v) for v in fields[name])
        for name in ("seed", "every"):
            if name in fields:
                fields[name] = int(fields[name])
        if "statuses" in fields:
            fields["statuses"] = tuple(int(s) for s in fields["statuses"])
        for name in names - {"verbs", "resources", "statuses", "seed", "every"}:
            if name in fields:
                fields[name] = float(fields[name])
        config = cls(**fields)
        config.check()
        return config

    def check(self) -> None:
        for name in ("error_rate", "timeout_rate", "committed_timeouts"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.error_rate + self.timeout_rate > 1.0:
            raise ValueError("error_rate + timeout_rate must not exceed 1")
        if any(s < 500 or s > 599 for s in self.statuses) or not self.statuses:
            raise ValueError("statuses must be 5xx codes")
        if min(self.hold_seconds, self.drop_watches_every, self.gone_every, self.every) < 0:
            raise ValueError("durations must not be negative")

    def to_json(self) -> dict[str, Any]:
        shown = dataclasses.asdict(self)
        shown["verbs"], shown["resources"] = sorted(self.verbs), sorted(self.resources)
        shown["statuses"] = list(self.statuses)
        return shown


@dataclass(frozen=True)
class Fault:
    status: int = 0
    """5xx to answer at once; 0 for a held request."""
    committed: bool = False
    """A held request that is carried out first."""


def server_error(status: int) -> errors.ApiError:
    """As apimachinery words them: NewInternalError over an etcd failure, and a 503 from the server."""
    if status == 500:
        cause = "etcdserver: request timed out"
        return errors.ApiError(
            500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]}
        )
    if status == 503:
        unable = "the server is currently unable to handle the request"
        failure = errors.ApiError(503, "ServiceUnavailable", unable)
        failure.headers["Retry-After"] = "1"
        return failure
    prevented = f"an error on the server ({status}) has prevented the request from succeeding"
    return errors.ApiError(status, "InternalError", prevented)


def request_timeout() -> errors.ApiError:
    """What the apiserver's timeout filter answers (NewTimeoutError); the work may still be going on."""
    return errors.ApiError(
        504,
        "Timeout",
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
        {"retryAfterSeconds": 0},
    )


def too_old(version: int, oldest: int) -> errors.ApiError:
    return errors.gone(f"too old resource version: {version} ({oldest})")


class ApiFaults:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.config = ApiFaultConfig()
        self.counts: collections.Counter[str] = collections.Counter()
        """errors, timeouts, committed (held writes carried out), drops and gones (watches ended)."""
        self._random = random.Random(0)
        self._matching = 0
        """Requests the faults applied to, for `every`."""
        self._watches: dict[Watcher, Ending | None] = {}
        self._timers: list[Timer] = []
        self._stopping = asyncio.Event()
        """Set when the server stops: held requests answer at once instead of outliving it."""

    # -- switching ----------------------------------------------------------------------------
    def set(self, config: ApiFaultConfig) -> None:
        """Replace the faults; the generator and the periodic timers start afresh."""
        config.check()
        self.config = config
        self._random = random.Random(config.seed)
        self._matching = 0
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        if config.drop_watches_every:
            self._every(config.drop_watches_every, "drop")
        if config.gone_every:
            self._every(config.gone_every, "gone")

    def _every(self, period: float, ending: Ending) -> None:
        tick = functools.partial(self._tick, period, ending)
        self._timers.append(self.store.clock.call_later(period, tick))

    def _tick(self, period: float, ending: Ending) -> None:
        self.end_watches(ending)
        self._every(period, ending)

    def stop(self) -> None:
        self._stopping.set()

    # -- requests -----------------------------------------------------------------------------
    def pick(self, verb: str, resource: str) -> Fault | None:
        config = self.config
        if config.error_rate <= 0 and config.timeout_rate <= 0 and config.every <= 0:
            return None
        if config.verbs and verb not in config.verbs:
            return None
        if config.resources and resource not in config.resources:
            return None
        if config.every > 0:
            return self._in_turn(verb)
        draw = self._random.random()
        if draw < config.error_rate:
            return Fault(status=self._random.choice(config.statuses))
        if draw < config.error_rate + config.timeout_rate and verb not in LONG_RUNNING_VERBS:
            writes = verb not in ("get", "list")
            return Fault(committed=writes and self._random.random() < config.committed_timeouts)
        return None

    def _in_turn(self, verb: str) -> Fault | None:
        self._matching += 1
        if self._matching % self.config.every:
            return None
        turn, kinds = self._matching // self.config.every - 1, len(self.config.statuses) + 1
        if turn % kinds < len(self.config.statuses):
            return Fault(status=self.config.statuses[turn % kinds])
        if verb in LONG_RUNNING_VERBS:
            return None
        return Fault(committed=verb not in ("get", "list") and (turn // kinds) % 2 == 0)

    async def serve(
        self, verb: str, resource: str, handle: Callable[[], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Answer a request as the faults say: at once with a 5xx, held then 504, or normally."""
        fault = self.pick(verb, resource)
        if fault is None:
            return await handle()
        if fault.status:
            self.counts["errors"] += 1
            logger.info("fault: %s %s answered %s", verb, resource, fault.status)
            raise server_error(fault.status)
        self.counts["timeouts"] += 1
        if fault.committed:
            self.counts["committed"] += 1
            try:
                await handle()
            except errors.ApiError as err:  # the client never hears this answer either
                logger.info("fault: the held %s %s failed anyway: %s", verb, resource, err.message)
        held = self.config.hold_seconds
        logger.info("fault: %s %s held %.1fs (carried out: %s)", verb, resource, held, fault.committed)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=held)
        raise request_timeout()

    # -- watches ------------------------------------------------------------------------------
    def opened(self, watcher: Watcher) -> None:
        self._watches[watcher] = None

    def closed(self, watcher: Watcher) -> Ending | None:
        """Forget a watch; returns how a fault ended it, if one did."""
        return self._watches.pop(watcher, None)

    def open_watches(self) -> int:
        return len(self._watches)

    def end_watches(self, ending: Ending) -> int:
        """End every open watch now: cut (`drop`) or with a 410 ERROR event (`gone`). Returns how many."""
        if ending == "gone":
            self.store.compact()
        ended = 0
        for watcher, already in self._watches.items():
            if already is None:
                self._watches[watcher] = ending
                watcher.queue.put_nowait(None)
                ended += 1
        self.counts[f"{ending}s"] += ended
        if ended:
            logger.info("fault: %s open watches ended (%s)", ended, ending)
        return ended

    async def end_stream(
        self, request: web.Request, response: web.StreamResponse, ending: Ending, delivered: int
    ) -> None:
        """Finish a watch a fault ended: a 410 ERROR event and a clean end, or a cut connection."""
        if ending == "gone":
            expired = too_old(delivered, self.store.oldest_resumable() + 1)
            event = {"type": "ERROR", "object": expired.status()}
            await response.write(_line(event))
        elif request.transport is not None:
            request.transport.abort()  # no final chunk: the client reads an incomplete response

    def snapshot(self) -> dict[str, Any]:
        """What `GET /simctl/v1/faults/api` answers."""
        return {"config": self.config.to_json(), "counts": dict(self.counts), "watches": self.open_watches()}

    # -- control ------------------------------------------------------------------------------
    def routes(self) -> list[web.RouteDef]:
        return [web.get("/simctl/v1/faults/api", self._show), web.post("/simctl/v1/faults/api", self._change)]

    async def _show(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    async def _change(self, request: web.Request) -> web.Response:
        """The body's config fields replace the faults (when there are any); `watches` ends open watches."""
        body = await request.json()
        if not isinstance(body, dict):
            return web.json_response({"error": "expected a JSON object"}, status=400)
        ending = body.pop("watches", None)
        try:
            if ending is not None and ending not in WATCH_ENDINGS:
                raise ValueError('"watches" must be "drop" or "gone"')
            if body:
                self.set(ApiFaultConfig.from_json(body))
        except (TypeError, ValueError) as err:
            return web.json_response({"error": str(err)}, status=400)
        ended = self.end_watches(ending) if ending else 0
        return web.json_response({**self.snapshot(), "ended": ended})


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"
