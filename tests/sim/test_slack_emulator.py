"""The Slack emulator against the real slack_sdk and slack-bolt on loopback: Web API, limits, sockets, HTTP.

No mocks: every test drives real clients through sockets and waits on emulator events, never on fixed sleeps.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from slack_bolt import Ack, App, BoltRequest, Respond
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient, WebhookClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.socket_mode import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from sim.slack import http_mode, payloads, ratelimits, render
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import FaultConfig, RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig

BUTTONS: list[dict[str, Any]] = [
    {"type": "section", "block_id": "job", "text": {"type": "mrkdwn", "text": "*Job 42* queued"}},
    {
        "type": "actions",
        "block_id": "controls",
        "elements": [
            {"type": "button", "action_id": "cancel_job", "text": {"type": "plain_text", "text": "Cancel"},
             "value": "job-42", "style": "danger"},
        ],
    },
]  # fmt: skip


pytestmark = pytest.mark.usefixtures("slack_env")


def start(**config: Any) -> BackgroundSlack:
    config.setdefault("rate_limits", RateLimitConfig(enabled=False))
    return BackgroundSlack(SlackConfig(**config))


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    with start(socket_mode=SocketModeConfig(ack_timeout=1.0, connect_wait=5.0)) as running:
        yield running


@pytest.fixture
def client(slack: BackgroundSlack) -> WebClient:
    return WebClient(token=slack.bot_token, base_url=slack.api_url)


def bolt_app(slack: BackgroundSlack, **kwargs: Any) -> App:
    return App(client=WebClient(token=slack.bot_token, base_url=slack.api_url), **kwargs)


@pytest.fixture
def socket_app(slack: BackgroundSlack) -> Iterator[tuple[App, SocketModeHandler]]:
    app = bolt_app(slack)
    handler = SocketModeHandler(app, slack.app_token)
    yield app, handler
    handler.close()  # type: ignore[no-untyped-call]


def connect(slack: BackgroundSlack, handler: SocketModeHandler) -> None:
    handler.connect()  # type: ignore[no-untyped-call]
    slack.wait_for_connections(1)


def api_error(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as raised:
        call()
    return raised.value


# -- Web API ---------------------------------------------------------------------------------------
def test_auth_test_names_the_bot(client: WebClient) -> None:
    answer = client.auth_test()
    assert (answer["user_id"], answer["bot_id"], answer["team_id"]) == ("U_GPUBOT", "B_GPUBOT", "T_GPULAB")
    assert answer["url"] == "https://gpulab.slack.com/"


@pytest.mark.parametrize(("token", "error"), [("xoxb-unknown", "invalid_auth"), ("", "not_authed")])
def test_unknown_tokens_are_refused(slack: BackgroundSlack, token: str, error: str) -> None:
    bad = WebClient(token=token or None, base_url=slack.api_url)
    assert api_error(bad.auth_test).response["error"] == error


def test_message_metadata_is_listed_only_when_asked_for(client: WebClient) -> None:
    """docs.slack.dev/reference/methods/conversations.history, …/conversations.replies: include_all_metadata
    "Return all metadata associated with messages. Defaults to false." """
    metadata = {"event_type": "task_created", "event_payload": {"id": "TK-1"}}
    parent = client.chat_postMessage(channel="C_GPU", text="Job 42 queued", metadata=metadata)
    client.chat_postMessage(channel="C_GPU", text="node ready", thread_ts=parent["ts"], metadata=metadata)
    plain = client.conversations_replies(channel="C_GPU", ts=parent["ts"])["messages"]
    asked = client.conversations_replies(channel="C_GPU", ts=parent["ts"], include_all_metadata=True)
    assert [m.get("metadata") for m in plain] == [None, None]
    assert [m.get("metadata") for m in asked["messages"]] == [metadata, metadata]
    history = client.conversations_history(channel="C_GPU", include_all_metadata=True)["messages"]
    assert [m.get("metadata") for m in history] == [metadata]
    assert "metadata" not in client.conversations_history(channel="C_GPU")["messages"][0]


def test_reading_history_without_its_scope_is_missing_scope() -> None:
    with start(bot_scopes=frozenset({"chat:write", "im:write"})) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
        parent = client.chat_postMessage(channel="C_GPU", text="Job 42 queued")
        refused = api_error(lambda: client.conversations_replies(channel="C_GPU", ts=parent["ts"])).response
        assert (refused["error"], refused["needed"], refused["provided"]) == (
            "missing_scope",
            "channels:history",
            "chat:write,im:write",
        )
        dm = client.conversations_open(users="U_ALICE")["channel"]["id"]
        assert api_error(lambda: client.conversations_history(channel=dm)).response["needed"] == "im:history"


def test_post_message_and_thread_reply(slack: BackgroundSlack, client: WebClient) -> None:
    parent = client.chat_postMessage(channel="C_GPU", text="Job 42 queued", blocks=BUTTONS)
    reply = client.chat_postMessage(channel="C_GPU", text="node ready", thread_ts=parent["ts"])
    nested = client.chat_postMessage(channel="C_GPU", text="running", thread_ts=reply["ts"])
    assert parent["channel"] == "C_GPU" and parent["message"]["blocks"] == BUTTONS
    assert float(parent["ts"]) < float(reply["ts"]) < float(nested["ts"])
    assert nested["message"]["thread_ts"] == parent["ts"], "a reply's ts names its parent's thread"
    thread = client.conversations_replies(channel="C_GPU", ts=parent["ts"])["messages"]
    assert [m["text"] for m in thread] == ["Job 42 queued", "node ready", "running"]
    assert thread[0]["reply_count"] == 2
    history = client.conversations_history(channel="C_GPU")["messages"]
    assert [m["ts"] for m in history] == [parent["ts"]]
    stored = slack.messages("#gpu-users")
    assert [(m["text"], m["thread_ts"], m["username"]) for m in stored] == [
        ("Job 42 queued", "", "gpubot"),
        ("node ready", parent["ts"], "gpubot"),
        ("running", parent["ts"], "gpubot"),
    ]


def test_update_keeps_every_revision(slack: BackgroundSlack, client: WebClient) -> None:
    posted = client.chat_postMessage(channel="C_GPU", text="GPU 0 %")
    for percent in (40, 80):
        updated = client.chat_update(channel="C_GPU", ts=posted["ts"], text=f"GPU {percent} %")
    assert updated["ts"] == posted["ts"] and updated["message"]["edited"]["user"] == "U_GPUBOT"
    (message,) = slack.messages("C_GPU")
    assert [r["text"] for r in message["revisions"]] == ["GPU 0 %", "GPU 40 %", "GPU 80 %"]
    assert message["edited"] and message["text"] == "GPU 80 %"


def test_update_refusals(slack: BackgroundSlack, client: WebClient) -> None:
    slack.post_message("alice", "C_GPU", "hello")
    (human,) = slack.messages("C_GPU")
    refused = api_error(lambda: client.chat_update(channel="C_GPU", ts=human["ts"], text="x"))
    assert refused.response["error"] == "cant_update_message"
    missing = api_error(lambda: client.chat_update(channel="C_GPU", ts="1.000001", text="x"))
    assert missing.response["error"] == "message_not_found"


def test_ephemeral_is_only_for_its_user(slack: BackgroundSlack, client: WebClient) -> None:
    answer = client.chat_postEphemeral(channel="C_GPU", user="U_BOB", text="your quota is 2 GPUs")
    assert answer["message_ts"]
    assert slack.messages("C_GPU") == []
    (shown,) = slack.ephemerals("bob")
    assert (shown["user"], shown["message_ts"], shown["text"]) == (
        "U_BOB",
        answer["message_ts"],
        shown["text"],
    )
    assert slack.ephemerals("alice") == []


def test_delete_marks_the_message(slack: BackgroundSlack, client: WebClient) -> None:
    posted = client.chat_postMessage(channel="C_OPS", text="oops")
    assert client.chat_delete(channel="C_OPS", ts=posted["ts"])["ts"] == posted["ts"]
    assert slack.messages("C_OPS")[0]["deleted"]
    assert client.conversations_history(channel="C_OPS")["messages"] == []
    again = api_error(lambda: client.chat_delete(channel="C_OPS", ts=posted["ts"]))
    assert again.response["error"] == "message_not_found"


def test_direct_messages(slack: BackgroundSlack, client: WebClient) -> None:
    opened = client.conversations_open(users="U_ALICE")
    assert opened["channel"]["id"] == "D_ALICE" and not opened["already_open"]
    assert client.conversations_open(users="U_ALICE")["already_open"]
    posted = client.chat_postMessage(channel="U_ALICE", text="your job finished")
    assert posted["channel"] == "D_ALICE"
    assert client.conversations_info(channel="D_ALICE")["channel"]["user"] == "U_ALICE"
    assert [m["text"] for m in slack.messages("D_ALICE")] == ["your job finished"]


@pytest.mark.parametrize(("user", "name", "admin"), [("U_ALICE", "alice", False), ("U_ADMIN", "admin", True)])
def test_users_info(client: WebClient, user: str, name: str, admin: bool) -> None:
    found = client.users_info(user=user)["user"]
    assert (found["id"], found["name"], found["is_admin"], found["is_bot"]) == (user, name, admin, False)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.chat_postMessage(channel="C_NOPE", text="x"), "channel_not_found"),
        (lambda c: c.chat_postMessage(channel="C_GPU"), "no_text"),
        (
            lambda c: c.chat_postMessage(channel="C_GPU", text="x", blocks=[{"text": "no type"}]),
            "invalid_blocks",
        ),
        (lambda c: c.chat_postMessage(channel="C_SECRET", text="x"), "not_in_channel"),
        (lambda c: c.chat_postEphemeral(channel="C_GPU", user="U_NOPE", text="x"), "user_not_found"),
        (lambda c: c.users_info(user="U_NOPE"), "user_not_found"),
        (lambda c: c.apps_connections_open(app_token=c.token), "not_allowed_token_type"),
        (lambda c: c.api_call("chat.fly"), "unknown_method"),
    ],
)
def test_errors_as_slack_names_them(call: Any, error: str) -> None:
    channels = (("C_GPU", "gpu-users"), ("C_SECRET", "secret"))
    with start(channels=channels, uninvited=frozenset({"C_SECRET"})) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
        assert api_error(lambda: call(client)).response["error"] == error


@pytest.mark.parametrize(
    ("change", "posting", "editing"),
    [
        ({"bot_member": False}, "not_in_channel", ""),
        ({"bot_member": False, "private": True}, "channel_not_found", ""),
        ({"archived": True}, "is_archived", "is_inactive"),
        ({"deleted": True}, "channel_not_found", "channel_not_found"),
    ],
)
def test_a_channel_changed_under_the_bot_refuses_its_writes_as_slack_does(
    slack: BackgroundSlack, client: WebClient, change: dict[str, bool], posting: str, editing: str
) -> None:
    root = client.chat_postMessage(channel="C_GPU", text="root")["ts"]
    answer = post_json(slack.url + "/emulator/v1/channel", {"channel": "C_GPU", **change})
    assert answer["ok"]
    reply = api_error(lambda: client.chat_postMessage(channel="C_GPU", text="x", thread_ts=root))
    assert reply.response["error"] == posting
    ephemeral = api_error(lambda: client.chat_postEphemeral(channel="C_GPU", user="U_ALICE", text="x"))
    assert ephemeral.response["error"] == posting
    edit = lambda: client.chat_update(channel="C_GPU", ts=root, text="y")  # noqa: E731
    if editing:
        assert api_error(edit).response["error"] == editing
    else:
        assert edit()["ok"]
    hidden = change.get("deleted") or change.get("private")
    info = None if hidden else client.conversations_info(channel="C_GPU")["channel"]
    assert info is None or (info["is_member"], info["is_archived"]) == (
        change.get("bot_member", True),
        change.get("archived", False),
    )
    dm = client.conversations_open(users="U_ALICE")["channel"]["id"]
    assert client.chat_postMessage(channel=dm, text="a DM still goes")["ok"]
    if change.get("archived") or change.get("deleted"):  # read-only or gone: nobody can type there
        with pytest.raises(LookupError):
            slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    slack.change_channel("C_GPU", bot_member=True, archived=False, deleted=False)  # invited, restored
    assert client.chat_postMessage(channel="C_GPU", text="back", thread_ts=root)["ok"]
    assert [m["text"] for m in slack.messages("C_GPU")] == ["y" if not editing else "root", "back"]


def test_connections_open_needs_an_app_token(slack: BackgroundSlack, client: WebClient) -> None:
    url = client.apps_connections_open(app_token=slack.app_token)["url"]
    assert url.startswith(slack.url.replace("http://", "ws://") + "/link/?ticket=")


# -- rate limits and faults ------------------------------------------------------------------------
def test_post_message_is_limited_per_channel() -> None:
    with start(rate_limits=RateLimitConfig(message_burst=2)) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
        client.chat_postMessage(channel="C_GPU", text="1")
        client.chat_postMessage(channel="C_GPU", text="2")
        limited = api_error(lambda: client.chat_postMessage(channel="C_GPU", text="3"))
        assert limited.response.status_code == 429 and limited.response["error"] == "ratelimited"
        assert limited.response.headers["Retry-After"] == "1"
        assert client.chat_postMessage(channel="C_OPS", text="other channel")["ok"]
        patient = WebClient(token=slack.bot_token, base_url=slack.api_url)
        patient.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
        assert patient.chat_postMessage(channel="C_GPU", text="after backing off")["ok"]
        statuses = [c.status for c in slack.calls("chat.postMessage")]
        assert statuses == [200, 200, 429, 200, 429, 200]


def test_tiered_methods_are_limited_per_minute() -> None:
    with start(rate_limits=RateLimitConfig(tier_per_minute={1: 1, 2: 2, 3: 2, 4: 2})) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
        client.users_info(user="U_ALICE")
        client.users_info(user="U_BOB")
        limited = api_error(lambda: client.users_info(user="U_ALICE"))
        assert (limited.response.status_code, limited.response.headers["Retry-After"]) == (429, "30")
        assert client.auth_test()["ok"], "each method has its own bucket"
        slack.set_rate_limits(enabled=False)
        assert client.users_info(user="U_ALICE")["ok"]


@pytest.mark.parametrize(
    ("now", "tokens_left", "wait"),
    [(0.0, 2.0, 0.0), (0.0, 0.0, 0.5), (0.5, 0.0, 0.0), (0.25, 0.0, 0.25), (10.0, 0.0, 0.0)],
)
def test_bucket_refills_at_its_rate(now: float, tokens_left: float, wait: float) -> None:
    bucket = ratelimits.Bucket(capacity=3, per_second=2.0, tokens=tokens_left, updated=0.0)
    assert bucket.take(now) == pytest.approx(wait)


def test_faults_are_deterministic(slack: BackgroundSlack, client: WebClient) -> None:
    def statuses() -> list[int]:
        slack.set_faults(FaultConfig(rate=0.5, statuses=(429, 503), seed=7))
        seen = []
        for _ in range(20):
            try:
                seen.append(client.api_test().status_code)
            except SlackApiError as failed:
                seen.append(failed.response.status_code)
        return seen

    first = statuses()
    assert first == statuses()
    assert set(first) == {200, 429, 503}
    assert client.apps_connections_open(app_token=slack.app_token)["ok"], "the socket URL is left healthy"


# -- Socket Mode with Bolt -------------------------------------------------------------------------
def test_slash_command_reaches_bolt_and_its_ack_is_shown(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler]
) -> None:
    app, handler = socket_app
    seen: list[dict[str, Any]] = []

    @app.command("/gpu")
    def gpu(ack: Ack, command: dict[str, Any], client: WebClient) -> None:
        seen.append(command)
        ack(text=f"Queued `{command['text']}`")
        top = client.chat_postMessage(channel=command["channel_id"], text="job 42 starting")
        client.chat_postMessage(channel=command["channel_id"], thread_ts=top["ts"], text="node is up")

    connect(slack, handler)
    delivery = slack.type_command("alice", "#gpu-users", "/gpu", "run train.py")
    assert delivery.acked and delivery.ack_payload == {"text": "Queued `run train.py`"}
    assert delivery.shown == "ephemeral"
    assert (seen[0]["user_id"], seen[0]["channel_id"], seen[0]["command"]) == ("U_ALICE", "C_GPU", "/gpu")
    assert seen[0]["response_url"].startswith(slack.url) and seen[0]["trigger_id"]
    assert [e["text"] for e in slack.ephemerals("alice")] == ["Queued `run train.py`"]
    thread = slack.wait_until(lambda: [m for m in slack.messages("C_GPU") if m["thread_ts"]])
    assert thread[0]["text"] == "node is up"
    assert slack.messages("C_GPU")[0]["ts"] == thread[0]["thread_ts"]


def test_in_channel_ack_is_posted_to_the_channel(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler]
) -> None:
    app, handler = socket_app
    app.command("/gpu")(lambda ack: ack(text="GPU pool: 0/5 nodes", response_type="in_channel"))
    connect(slack, handler)
    assert slack.type_command("bob", "C_OPS", "/gpu", "status").shown == "in_channel"
    assert [m["text"] for m in slack.messages("C_OPS")] == ["GPU pool: 0/5 nodes"]


def test_button_click_reaches_the_action_listener(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler], client: WebClient
) -> None:
    app, handler = socket_app
    clicks: list[dict[str, Any]] = []

    @app.action("cancel_job")
    def cancel(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        clicks.append(body)
        respond(text="Job 42 cancelled", replace_original=True)

    connect(slack, handler)
    posted = client.chat_postMessage(channel="C_GPU", text="Job 42", blocks=BUTTONS)
    delivery = slack.click_button("U_ADMIN", "C_GPU", posted["ts"], "cancel_job")
    assert delivery.acked and delivery.type == "interactive"
    action = clicks[0]["actions"][0]
    assert (action["action_id"], action["value"], action["block_id"]) == ("cancel_job", "job-42", "controls")
    assert clicks[0]["container"] == {
        "type": "message",
        "message_ts": posted["ts"],
        "channel_id": "C_GPU",
        "is_ephemeral": False,
    }
    assert clicks[0]["message"]["blocks"] == BUTTONS and clicks[0]["user"]["id"] == "U_ADMIN"
    (message,) = slack.wait_until(lambda: [m for m in slack.messages("C_GPU") if m["edited"]])
    assert message["text"] == "Job 42 cancelled" and len(message["revisions"]) == 2


def test_unacked_command_shows_operation_timeout(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler]
) -> None:
    _, handler = socket_app  # no /gpu listener: Bolt sends no ack
    connect(slack, handler)
    delivery = slack.type_command("alice", "C_GPU", "/gpu", "status")
    assert (delivery.acked, delivery.error, delivery.attempts) == (False, "timeout", 1)
    assert slack.ephemerals("alice")[0]["text"] == '/gpu failed with the error "operation_timeout"'


def test_refresh_disconnect_makes_bolt_reconnect(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler]
) -> None:
    app, handler = socket_app
    app.command("/gpu")(lambda ack: ack("pong"))
    connect(slack, handler)
    assert slack.disconnect_all() == 1
    # slack_sdk's builtin client reads nothing on the new socket until the old one is closed (up to 3 s).
    slack.wait_until(
        lambda: (
            len(slack.calls("apps.connections.open")) == 2
            and slack.connections() == slack.connections(draining=True) == 1
        )
    )
    delivery = slack.type_command("alice", "C_GPU", "/gpu", "ping")
    assert delivery.acked and delivery.ack_payload == {"text": "pong"}
    assert slack.emulator.hub.opened_total == 2


def test_connection_life_ends_in_a_refresh() -> None:
    with start(socket_mode=SocketModeConfig(connection_life=0.3)) as slack:
        app = bolt_app(slack)
        handler = SocketModeHandler(app, slack.app_token)
        try:
            handler.connect()  # type: ignore[no-untyped-call]
            slack.wait_until(
                lambda: len(slack.calls("apps.connections.open")) >= 2 and slack.connections() == 1
            )
        finally:
            handler.close()  # type: ignore[no-untyped-call]


# -- Socket Mode with the raw builtin client -------------------------------------------------------
def raw_client(slack: BackgroundSlack, listener: Any) -> SocketModeClient:
    sdk = SocketModeClient(
        app_token=slack.app_token, web_client=WebClient(base_url=slack.api_url), auto_reconnect_enabled=False
    )
    sdk.socket_mode_request_listeners.append(listener)
    return sdk


def test_unacked_event_is_redelivered(slack: BackgroundSlack) -> None:
    attempts: list[tuple[int | None, str | None]] = []

    def on_request(sdk: SocketModeClient, request: SocketModeRequest) -> None:
        attempts.append((request.retry_attempt, request.retry_reason))
        if request.retry_attempt == 2:
            sdk.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))

    sdk = raw_client(slack, on_request)
    try:
        sdk.connect()
        slack.wait_for_connections(1)
        delivery = slack.post_message("alice", "C_GPU", "<@U_GPUBOT> how busy is the pool?")
    finally:
        sdk.close()
    assert delivery is not None and delivery.acked and delivery.attempts == 3
    assert attempts == [(0, ""), (1, "timeout"), (2, "timeout")]
    assert len(set(delivery.envelope_ids)) == 3
    assert delivery.payload["event"]["type"] == "app_mention"


def test_each_envelope_goes_to_one_connection(slack: BackgroundSlack) -> None:
    received: dict[int, list[str]] = {0: [], 1: []}

    def listener(index: int) -> Any:
        def on_request(sdk: SocketModeClient, request: SocketModeRequest) -> None:
            received[index].append(request.envelope_id)
            sdk.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))

        return on_request

    clients = [raw_client(slack, listener(i)) for i in (0, 1)]
    try:
        for sdk in clients:
            sdk.connect()
        slack.wait_for_connections(2)
        deliveries = [slack.post_message("bob", "U_BOB", f"dm {i}") for i in range(4)]
    finally:
        for sdk in clients:
            sdk.close()
    assert all(d is not None and d.acked and d.attempts == 1 for d in deliveries)
    assert len(received[0]) == len(received[1]) == 2
    assert not set(received[0]) & set(received[1])


# -- HTTP mode -------------------------------------------------------------------------------------
class BoltHttp:
    """The smallest HTTP front for a Bolt App on loopback: raw body and headers into App.dispatch."""

    def __init__(self, app: App) -> None:
        bolt = app

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                headers: dict[str, str | Sequence[str]] = {k.lower(): v for k, v in self.headers.items()}
                response = bolt.dispatch(BoltRequest(body=body, headers=headers))
                self.send_response(response.status)
                for key, values in response.headers.items():
                    for value in values:
                        self.send_header(key, value)
                self.end_headers()
                self.wfile.write(response.body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/slack/events"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> BoltHttp:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_http_mode_signs_requests_bolt_accepts(slack: BackgroundSlack, client: WebClient) -> None:
    app = bolt_app(slack, signing_secret="s3cret")
    app.command("/gpu")(lambda ack, command: ack(text=f"http {command['text']}"))
    clicked: list[str] = []

    @app.action("cancel_job")
    def cancel(ack: Ack, action: dict[str, Any]) -> None:
        ack()
        clicked.append(action["value"])

    with BoltHttp(app) as server:
        slack.configure_http(bot_url=server.url, signing_secret="s3cret")
        delivery = slack.type_command("alice", "C_GPU", "/gpu", "status")
        assert (delivery.transport, delivery.status, delivery.ack_payload) == (
            "http",
            200,
            {"text": "http status"},
        )
        assert [e["text"] for e in slack.ephemerals("alice")] == ["http status"]
        posted = client.chat_postMessage(channel="C_GPU", text="Job 42", blocks=BUTTONS)
        assert slack.click_button("alice", "C_GPU", posted["ts"], "cancel_job", value="job-7").acked
        assert clicked == ["job-7"]
        slack.configure_http(signing_secret="not-the-secret")
        refused = slack.type_command("alice", "C_GPU", "/gpu", "status")
    assert (refused.acked, refused.status, refused.error) == (False, 401, "http_401")


def test_signature_matches_slacks_recipe() -> None:
    from slack_sdk.signature import SignatureVerifier

    body = b"command=%2Fgpu&text=status"
    headers = http_mode.signed_headers("s3cret", body, "application/x-www-form-urlencoded", now=1_700_000_000)
    verifier = SignatureVerifier("s3cret", clock=type("Fixed", (), {"now": lambda self: 1_700_000_000.0})())
    assert verifier.is_valid(body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"])


# -- control endpoints, response_url and rendering -------------------------------------------------
def post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def test_control_endpoints_drive_a_user(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler]
) -> None:
    app, handler = socket_app
    app.command("/gpu")(lambda ack: ack("ok from bolt"))
    connect(slack, handler)
    answer = post_json(
        slack.url + "/emulator/v1/command",
        {"user": "U_BOB", "channel": "C_GPU", "command": "/gpu", "text": "x"},
    )
    assert answer["delivery"]["acked"] and answer["delivery"]["ack_payload"] == {"text": "ok from bolt"}
    with urllib.request.urlopen(slack.url + "/emulator/v1/transcript", timeout=10) as response:
        transcript = json.loads(response.read())
    assert transcript["ephemerals"][0]["username"] == "bob"
    assert transcript["actions"][0]["detail"] == "/gpu x"
    with urllib.request.urlopen(slack.url + "/emulator/v1/transcript.txt", timeout=10) as response:
        assert "gpubot (only visible to bob): ok from bolt" in response.read().decode()


def test_response_url_works_five_times(
    slack: BackgroundSlack, socket_app: tuple[App, SocketModeHandler]
) -> None:
    app, handler = socket_app
    urls: list[str] = []

    @app.command("/gpu")
    def gpu(ack: Ack, command: dict[str, Any]) -> None:
        urls.append(command["response_url"])
        ack()

    connect(slack, handler)
    slack.type_command("alice", "C_GPU", "/gpu", "run")
    hook = WebhookClient(urls[0])
    statuses = [hook.send(text=f"update {i}", response_type="in_channel").status_code for i in range(6)]
    assert statuses == [200] * 5 + [404]
    assert [m["text"] for m in slack.messages("C_GPU")] == [f"update {i}" for i in range(5)]


def test_render_text_reads_like_slack(slack: BackgroundSlack, client: WebClient) -> None:
    slack.post_message("alice", "C_GPU", "anyone using the T4?")
    top = client.chat_postMessage(channel="C_GPU", text="Job 42", blocks=BUTTONS)
    client.chat_postMessage(channel="C_GPU", thread_ts=top["ts"], text="node ready")
    client.chat_update(channel="C_GPU", ts=top["ts"], text="Job 42 running", blocks=BUTTONS[:1])
    client.chat_postEphemeral(channel="C_GPU", user="U_ALICE", text="you have 1 job")
    text = slack.render_text()
    lines = text.splitlines()
    assert lines[0] == "#gpu-users (C_GPU)"
    assert lines[1].endswith("alice: anyone using the T4?")
    assert lines[2].endswith("gpubot: (edited)") and lines[3].strip() == "| *Job 42* queued"
    assert lines[4].strip().startswith("↳ [") and lines[4].endswith("gpubot: node ready")
    assert lines[5].endswith("gpubot (only visible to alice): you have 1 job")
    assert render.render_blocks(BUTTONS) == ["*Job 42* queued", "[Cancel] (danger)"]


def test_find_button_looks_in_accessories_too() -> None:
    extend = {"type": "button", "action_id": "extend", "text": {"type": "plain_text", "text": "+1h"}}
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}, "accessory": extend}
    ]
    assert payloads.find_button(blocks, "extend").block_id == "b0"
    with pytest.raises(LookupError):
        payloads.find_button(blocks, "cancel_job")


def test_the_transcript_shows_escaped_mrkdwn_as_a_slack_client_does() -> None:
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "`echo x &gt;&amp;2` &lt;ok&gt;"}},
        {"type": "section", "text": {"type": "plain_text", "text": "&amp; stays"}},
    ]
    assert render.render_blocks(blocks) == ["`echo x >&2` <ok>", "&amp; stays"]


def test_a_date_token_shows_its_fallback_in_the_transcript() -> None:
    text = "lease ends <!date^1767630600^{date_short_pretty} at {time}|Mon 16:30 UTC>"
    assert render.render_blocks([{"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}]) == [
        "lease ends Mon 16:30 UTC"
    ]
