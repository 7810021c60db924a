"""The Slack emulator's aiohttp app: Web API at /api/, Socket Mode at /link/, controls at /emulator/v1/.

One loopback port serves everything; `runner.BackgroundSlack` runs it on its own thread for tests and demo.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from sim.slack import directory, files, http_mode, render, scheduling, views, webapi
from sim.slack.deliveries import HTTP, SOCKET_MODE, Delivery
from sim.slack.http_mode import HttpModeConfig
from sim.slack.ratelimits import FaultConfig, Faults, RateLimitConfig, RateLimiter
from sim.slack.responses import ResponseUrls
from sim.slack.socket_mode import LINK_PATH, SocketModeConfig, SocketModeHub
from sim.slack.transcript import DEFAULT_CHANNELS, DEFAULT_USERS, Identity, Json, Team, User, Workspace
from sim.slack.users import SimulatedUsers, respond

logger = logging.getLogger(__name__)

BOT_TOKEN = "xoxb-1-gpubot-emulated"
APP_TOKEN = "xapp-1-A_GPUBOT-1-emulated"
BOT_METHODS = webapi.BOT_METHODS | files.METHODS | views.METHODS | directory.METHODS | scheduling.METHODS
SERVER_ERRORS = {500: "internal_error", 502: "bad_gateway", 503: "service_unavailable"}


@dataclass
class SlackConfig:
    host: str = "127.0.0.1"
    port: int = 0
    mode: str = SOCKET_MODE
    """`socket_mode`, or `http` to POST signed requests to `http.bot_url`."""
    bot_tokens: tuple[str, ...] = (BOT_TOKEN,)
    app_tokens: tuple[str, ...] = (APP_TOKEN,)
    identity: Identity = field(default_factory=Identity)
    users: tuple[User, ...] = DEFAULT_USERS
    channels: tuple[tuple[str, str], ...] = DEFAULT_CHANNELS
    """(id, name) pairs; every seeded user is a member of each."""
    uninvited: frozenset[str] = frozenset()
    """Channel ids the bot has not joined: chat.postMessage there answers not_in_channel."""
    rate_limits: RateLimitConfig = field(default_factory=RateLimitConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    socket_mode: SocketModeConfig = field(default_factory=SocketModeConfig)
    http: HttpModeConfig = field(default_factory=HttpModeConfig)
    max_file_bytes: int = 1 << 30
    """files.getUploadURLExternal answers file_upload_size_restricted above this `length`."""
    home_tab_enabled: bool = True
    """The manifest's `features.app_home.home_tab_enabled` (deploy/slack-app-manifest.yaml turns it on)."""
    bot_scopes: frozenset[str] | None = None
    """The bot token's scopes; None grants every scope. Only conversations.history and .replies check them
    (an app installed before it asked for the history scopes answers `missing_scope` there)."""


@dataclass(frozen=True)
class Call:
    """One Web API call as the emulator answered it."""

    method: str
    status: int
    error: str
    at: float
    params: Json


class SlackEmulator:
    def __init__(self, config: SlackConfig | None = None) -> None:
        self.config = config or SlackConfig()
        self.workspace = Workspace(
            identity=self.config.identity,
            users=self.config.users,
            channels=self.config.channels,
            uninvited=self.config.uninvited,
        )
        self.limiter = RateLimiter(self.config.rate_limits)
        self.faults = Faults(self.config.faults)
        self.hub = SocketModeHub(self.config.socket_mode, app_id=self.config.identity.app_id)
        self.response_urls = ResponseUrls()
        self.context = webapi.Context(
            self.workspace,
            issue_ws_url=self.hub.issue_url,
            base_url=lambda: self.url,
            max_file_bytes=self.config.max_file_bytes,
            later=self._later,
            home_tab_enabled=self.config.home_tab_enabled,
            bot_scopes=self.config.bot_scopes,
        )
        self.users = SimulatedUsers(
            self.workspace,
            deliver=self.deliver,
            response_urls=self.response_urls,
            context=self.context,
            base_url=lambda: self.url,
        )
        self.calls: list[Call] = []
        self.on_activity: Callable[[], None] = lambda: None
        """Called after every Web API call, transcript change and connection change."""
        self.workspace.on_change(lambda: self.on_activity())
        self.hub.on_change = lambda: self.on_activity()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # -- running ------------------------------------------------------------------------------
    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        self.url = f"http://{self.config.host}:{self._runner.addresses[0][1]}"
        self.hub.base_url = self.url
        self._session = aiohttp.ClientSession()
        logger.info("Slack emulator serving at %s (%s)", self.url, self.config.mode)

    async def stop(self) -> None:
        await self.hub.close_all()
        if self._session:
            await self._session.close()
        if self._runner:
            await self._runner.cleanup()

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.route("*", "/api/{method}", self._web_api),
                web.get(LINK_PATH, self.hub.handle),
                web.post(files.UPLOAD_PATH + "{ticket}", self._upload),
                web.get(files.PRIVATE_PATH + "{file}/{name}", self._private_file),
                web.get(files.PRIVATE_PATH + "{file}/download/{name}", self._private_file),
                web.get("/emulator/v1/health", self._health),
                web.get("/emulator/v1/transcript", self._transcript),
                web.get("/emulator/v1/transcript.txt", self._transcript_text),
                web.get("/emulator/v1/calls", self._calls),
                web.post("/emulator/v1/command", self._command),
                web.post("/emulator/v1/click", self._click),
                web.post("/emulator/v1/submit", self._submit),
                web.post("/emulator/v1/message", self._message),
                web.post("/emulator/v1/home/open", self._open_home),
                web.post("/emulator/v1/home/click", self._click_home),
                web.get("/emulator/v1/home", self._home),
                web.post("/emulator/v1/disconnect", self._disconnect),
                web.post("/emulator/v1/ratelimits", self._set_rate_limits),
                web.post("/emulator/v1/faults", self._set_faults),
                web.post("/emulator/v1/channel", self._change_channel),
                web.post("/emulator/v1/response/{kind}/{hook}", self._response_url),
            ]
        )
        return app

    # -- delivering to the app ----------------------------------------------------------------
    async def deliver(self, kind: str, payload: Json, accepts_response_payload: bool) -> Delivery:
        if self.config.mode == HTTP:
            assert self._session is not None, "the emulator is not started"
            return await http_mode.deliver(self._session, self.config.http, kind, payload)
        return await self.hub.deliver(kind, payload, accepts_response_payload=accepts_response_payload)

    # -- Web API ------------------------------------------------------------------------------
    async def _web_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await read_params(request)
        token = bearer_token(request) or str(params.pop("token", "") or "")
        params.pop("token", None)
        status, body, headers = self.call(method, params, token)
        if status != 200 and self.faults.config.delay > 0:
            await asyncio.sleep(self.faults.config.delay)
        self.calls.append(Call(method, status, str(body.get("error", "")), time.time(), params))
        self.on_activity()
        return web.json_response(body, status=status, headers=headers)

    def call(self, method: str, params: Json, token: str) -> tuple[int, Json, dict[str, str]]:
        """(HTTP status, body, headers) exactly as Slack would answer this call."""
        if token in self.config.app_tokens:
            methods, other = webapi.APP_METHODS, BOT_METHODS
        elif token in self.config.bot_tokens:
            methods, other = BOT_METHODS, webapi.APP_METHODS
        else:
            return 200, {"ok": False, "error": "invalid_auth" if token else "not_authed"}, {}
        if method not in methods:
            error = "not_allowed_token_type" if method in other else "unknown_method"
            return 200, {"ok": False, "error": error}, {}
        failure = self._injected_failure(method, params)
        if failure is not None:
            return failure
        try:
            result = methods[method](self.context, params)
        except webapi.SlackError as exc:
            return 200, {"ok": False, "error": exc.error, **exc.extra}, {}
        return 200, {"ok": True, **result}, {}

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        """Called from a Web API method, so on the emulator's loop."""
        asyncio.get_running_loop().call_later(max(delay, 0.0), action)

    # -- file bytes ---------------------------------------------------------------------------
    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL files.getUploadURLExternal hands out: raw bytes or a multipart form."""
        data = await read_upload(request)
        status, text = files.accept_upload(self.workspace, request.match_info["ticket"], data)
        self.on_activity()
        return web.Response(status=status, text=text)

    async def _private_file(self, request: web.Request) -> web.Response:
        """`url_private`: the bytes, for a request carrying the bot token as a Bearer header."""
        if bearer_token(request) not in self.config.bot_tokens:
            return web.Response(status=403, text="url_private needs Authorization: Bearer <bot token>")
        content = files.private_content(self.workspace, request.match_info["file"])
        if content is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=content, content_type="application/octet-stream")

    def _injected_failure(self, method: str, params: Json) -> tuple[int, Json, dict[str, str]] | None:
        status = self.faults.pick(method)
        if status == 429:
            return _ratelimited(self.faults.config.retry_after)
        if status:
            return status, {"ok": False, "error": SERVER_ERRORS.get(status, "internal_error")}, {}
        wait = self.limiter.check(method, channel=str(params.get("channel", "")), now=time.monotonic())
        return _ratelimited(wait) if wait else None

    # -- controls -----------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "connections": len(self.hub.live()), "mode": self.config.mode})

    async def _transcript(self, request: web.Request) -> web.Response:
        return web.json_response(self.workspace.snapshot())

    async def _transcript_text(self, request: web.Request) -> web.Response:
        return web.Response(text=render.render_text(self.workspace.snapshot()))

    async def _calls(self, request: web.Request) -> web.Response:
        method = request.query.get("method")
        calls = [asdict(c) for c in self.calls if method is None or c.method == method]
        return web.json_response({"calls": calls})

    async def _command(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        return await _delivery_response(
            self.users.type_command(
                str(body.get("user", "")),
                str(body.get("channel", "")),
                str(body.get("command", "")),
                str(body.get("text", "")),
                team=_team(body.get("team")),
            )
        )

    async def _click(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        value = body.get("value")
        return await _delivery_response(
            self.users.click_button(
                str(body.get("user", "")),
                str(body.get("channel", "")),
                str(body.get("message_ts", "")),
                str(body.get("action_id", "")),
                None if value is None else str(value),
                team=_team(body.get("team")),
            )
        )

    async def _submit(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        raw = body.get("values")
        typed = raw if isinstance(raw, dict) else {}
        return await _delivery_response(
            self.users.submit_view(
                str(body.get("user", "")),
                str(body.get("view_id", "")),
                {str(k): str(v) for k, v in typed.items()},
                team=_team(body.get("team")),
            )
        )

    def home_of(self, user: str) -> Json | None:
        """The Home view published for `user` (an id or a name), or None."""
        found = next((u.id for u in self.workspace.users.values() if user in (u.id, u.name)), user)
        view = self.context.homes.get(found)
        return dict(view) if view is not None else None

    async def _open_home(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        return await _delivery_response(
            self.users.open_home(str(body.get("user", "")), str(body.get("tab", "home")))
        )

    async def _click_home(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        value = body.get("value")
        return await _delivery_response(
            self.users.click_home_button(
                str(body.get("user", "")),
                str(body.get("action_id", "")),
                None if value is None else str(value),
            )
        )

    async def _home(self, request: web.Request) -> web.Response:
        view = self.home_of(request.query.get("user", ""))
        if view is None:
            return web.json_response({"ok": False, "error": "nothing published"}, status=404)
        return web.json_response({"ok": True, "view": view, "text": render.render_blocks(view["blocks"])})

    async def _message(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        posted = self.users.post_message(
            str(body.get("user", "")),
            str(body.get("channel", "")),
            str(body.get("text", "")),
            str(body.get("thread_ts", "")),
        )
        try:
            delivery = await posted
        except LookupError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=404)
        return web.json_response({"ok": True, "delivery": delivery.to_dict() if delivery else None})

    async def _disconnect(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        count = await self.hub.disconnect_all(str(body.get("reason", "refresh_requested")))
        return web.json_response({"ok": True, "disconnected": count})

    async def _set_rate_limits(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        fields = {k: v for k, v in body.items() if k in ("enabled", "messages_per_second", "message_burst")}
        self.limiter.reset(RateLimitConfig(**fields))
        return web.json_response({"ok": True, "rate_limits": asdict(self.limiter.config)})

    async def _set_faults(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        self.faults.set(
            FaultConfig(
                rate=float(body.get("rate", 0.0)),
                statuses=tuple(int(s) for s in body.get("statuses", (429, 500, 503))),
                seed=int(body.get("seed", 0)),
                methods=frozenset(str(m) for m in body.get("methods", ())),
                retry_after=int(body.get("retry_after", 1)),
                every=int(body.get("every", 0)),
                delay=float(body.get("delay", 0.0)),
            )
        )
        return web.json_response({"ok": True})

    async def _change_channel(self, request: web.Request) -> web.Response:
        """Remove the bot from a channel (or invite it back), make it private, archive or delete it."""
        body = await _json_body(request)
        changes = {k: bool(body[k]) for k in ("bot_member", "private", "archived", "deleted") if k in body}
        try:
            channel = self.workspace.change_channel(str(body.get("channel", "")), **changes)
        except LookupError as exc:
            return web.json_response({"ok": False, "error": str(exc.args[0])}, status=404)
        return web.json_response({"ok": True, "channel": channel.to_api() | {"deleted": channel.deleted}})

    async def _response_url(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        status, answer = respond(self.response_urls, self.workspace, request.match_info["hook"], body)
        if isinstance(answer, str):
            return web.Response(status=status, text=answer)
        return web.json_response(answer, status=status)


async def read_params(request: web.Request) -> Json:
    """slack_sdk sends JSON for chat.* and form bodies elsewhere; GET callers use the query string."""
    params: Json = dict(request.query)
    if request.method != "POST" or not request.can_read_body:
        return params
    if request.content_type == "application/json":
        body: Any = await request.json()
        if isinstance(body, dict):
            params.update(body)
        return params
    form = await request.post()
    params.update({key: value for key, value in form.items() if isinstance(value, str)})
    return params


async def read_upload(request: web.Request) -> bytes:
    """slack_sdk POSTs the raw bytes; Slack's docs also allow a multipart form (`-F filename=@file`), whose
    first file part (or a part named `filename` or `file`) is the content."""
    if not request.content_type.startswith("multipart/"):
        return await request.read()
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if isinstance(part, aiohttp.BodyPartReader) and (part.filename or part.name in ("filename", "file")):
            return bytes(await part.read())
    return b""


def bearer_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    return header[len("Bearer ") :].strip() if header.startswith("Bearer ") else ""


def _ratelimited(retry_after: int) -> tuple[int, Json, dict[str, str]]:
    return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)}


def _team(raw: Any) -> Team | None:
    """A control request's `team`: `{"id", "domain", "enterprise_id", "enterprise_name"}`, to act as a
    user of that workspace; absent, the emulated one."""
    if not isinstance(raw, dict) or not raw.get("id"):
        return None
    fields = ("domain", "enterprise_id", "enterprise_name")
    return Team(str(raw["id"]), **{name: str(raw.get(name) or "") for name in fields})


async def _json_body(request: web.Request) -> Json:
    if not request.can_read_body:
        return {}
    body: Any = json.loads(await request.text() or "{}")
    return body if isinstance(body, dict) else {}


async def _delivery_response(action: Any) -> web.Response:
    try:
        delivery: Delivery = await action
    except LookupError as exc:
        return web.json_response({"ok": False, "error": str(exc.args[0] if exc.args else exc)}, status=404)
    return web.json_response({"ok": True, "delivery": delivery.to_dict()})
