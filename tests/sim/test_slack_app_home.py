"""The App Home as the emulator serves it, through the real slack_sdk and slack-bolt on loopback:
views.publish refusing what Slack refuses, app_home_opened over Socket Mode and HTTP mode with the tab's
current view, and a press on the Home tab delivered as Slack delivers it (a view container, no channel, no
response_url)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from tests.sim.test_slack_emulator import BoltHttp, post_json

pytestmark = pytest.mark.usefixtures("slack_env")

HOME = {
    "type": "home",
    "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": "Your GPU workloads"}},
        {"type": "section", "block_id": "w0", "text": {"type": "mrkdwn", "text": "• `train-1` — Running"}},
        {
            "type": "actions",
            "block_id": "a0",
            "elements": [
                {"type": "button", "action_id": "release", "text": {"type": "plain_text", "text": "Release"},
                 "value": "gpu/train-1"},
            ],
        },
        {
            "type": "actions",
            "block_id": "a1",
            "elements": [
                {"type": "button", "action_id": "release", "text": {"type": "plain_text", "text": "Release"},
                 "value": "gpu/train-2"},
            ],
        },
    ],
}  # fmt: skip


def refusal(call: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as raised:
        call()
    return dict(raised.value.response.data)


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    with BackgroundSlack(SlackConfig(rate_limits=RateLimitConfig(enabled=False))) as running:
        yield running


@pytest.fixture
def client(slack: BackgroundSlack) -> WebClient:
    return WebClient(token=slack.bot_token, base_url=slack.api_url)


def test_views_publish_refuses_a_bad_user_a_modal_and_a_home_tab_that_is_off(client: WebClient) -> None:
    assert refusal(lambda: client.views_publish(user_id="U_NOPE", view=HOME)) == {
        "ok": False,
        "error": "invalid_arguments",
        "response_metadata": {"messages": ["invalid `user_id`"]},
    }
    assert refusal(lambda: client.views_publish(user_id="", view=HOME))["error"] == "invalid_arguments"
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "Hi"}, "blocks": []}
    assert refusal(lambda: client.views_publish(user_id="U_ALICE", view=modal))["response_metadata"] == {
        "messages": ["[ERROR] failed to match all allowed schemas [json-pointer:/view]"]
    }
    with BackgroundSlack(SlackConfig(home_tab_enabled=False)) as off:
        closed = WebClient(token=off.bot_token, base_url=off.api_url)
        assert refusal(lambda: closed.views_publish(user_id="U_ALICE", view=HOME))["error"] == "not_enabled"


def test_a_published_home_reads_back_per_user_as_text(slack: BackgroundSlack, client: WebClient) -> None:
    assert slack.home("U_ALICE") is None and slack.home_text("U_ALICE") == ""
    client.views_publish(user_id="U_ALICE", view=HOME)
    assert slack.home("alice") == slack.home("U_ALICE")
    assert slack.home_text("U_ALICE").splitlines()[:2] == [
        "== Your GPU workloads ==",
        "• `train-1` — Running",
    ]
    assert slack.home("U_BOB") is None


def test_opening_the_home_sends_app_home_opened_with_the_tabs_view(slack: BackgroundSlack) -> None:
    app = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
    events: list[dict[str, Any]] = []
    bodies: list[dict[str, Any]] = []

    @app.event("app_home_opened")
    def opened(ack: Ack, event: dict[str, Any], body: dict[str, Any], client: WebClient) -> None:
        ack()
        events.append(event)
        if event["tab"] == "home":
            client.views_publish(user_id=event["user"], view=HOME)

    @app.action("release")
    def release(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        bodies.append(body)

    handler = SocketModeHandler(app, slack.app_token)
    handler.connect()  # type: ignore[no-untyped-call]
    try:
        slack.wait_for_connections(1)
        first = slack.open_home("alice")
        slack.wait_until(lambda: slack.home("U_ALICE"))
        again = slack.open_home("alice")
        messages = slack.open_home("alice", tab="messages")
        pressed = slack.click_home_button("alice", "release", "gpu/train-2")
        slack.wait_until(lambda: bodies)
    finally:
        handler.close()  # type: ignore[no-untyped-call]
    assert first.acked and again.acked and messages.acked and pressed.acked
    assert [e["tab"] for e in events] == ["home", "home", "messages"]
    assert events[0]["user"] == "U_ALICE" and events[0]["channel"].startswith("D")
    assert "view" not in events[0], "no view was published before the first open"
    assert events[1]["view"]["id"] == slack.home("U_ALICE")["id"] and events[1]["view"]["type"] == "home"
    assert "view" not in events[2]
    (body,) = bodies
    assert body["container"] == {"type": "view", "view_id": events[1]["view"]["id"]}
    assert body["view"]["type"] == "home" and body["actions"][0]["value"] == "gpu/train-2"
    assert "channel" not in body and "response_url" not in body and "message" not in body
    with pytest.raises(LookupError, match="no button"):
        slack.click_home_button("alice", "release", "gpu/train-9")
    with pytest.raises(LookupError, match="nothing is published"):
        slack.click_home_button("bob", "release")
    with pytest.raises(LookupError, match="no App Home tab"):
        slack.open_home("alice", tab="about")


def test_http_mode_posts_the_event_signed_and_control_endpoints_drive_the_home(
    slack: BackgroundSlack,
) -> None:
    app = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url), signing_secret="s3cret")
    opened: list[str] = []

    @app.event("app_home_opened")
    def on_open(ack: Ack, event: dict[str, Any], client: WebClient) -> None:
        ack()
        opened.append(event["user"])
        client.views_publish(user_id=event["user"], view=HOME)

    with BoltHttp(app) as server:
        slack.configure_http(bot_url=server.url, signing_secret="s3cret")
        answer = post_json(slack.url + "/emulator/v1/home/open", {"user": "bob"})
        assert answer["delivery"]["transport"] == "http" and answer["delivery"]["acked"]
        slack.wait_until(lambda: slack.home("U_BOB"))
    assert opened == ["U_BOB"]
    with urllib.request.urlopen(slack.url + "/emulator/v1/home?user=bob", timeout=10) as response:
        shown = json.loads(response.read())
    assert shown["view"]["type"] == "home" and shown["text"][0] == "== Your GPU workloads =="
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(slack.url + "/emulator/v1/home?user=carol", timeout=10)
    assert missing.value.code == 404
