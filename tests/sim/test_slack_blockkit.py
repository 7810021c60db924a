"""Block Kit validation in the Slack emulator, through the real slack_sdk over loopback: each message real
Slack refuses answers `invalid_blocks` with Slack's lines and JSON pointers; each message exactly at a
limit is accepted; response_url posts and command acks are refused as Slack refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient, WebhookClient
from slack_sdk.errors import SlackApiError

from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack

pytestmark = pytest.mark.usefixtures("slack_env")

Block = dict[str, Any]


@pytest.fixture(scope="module")
def slack() -> Iterator[BackgroundSlack]:
    """One emulator for the module: a refused post changes nothing, and accepted ones are told apart."""
    with BackgroundSlack(SlackConfig(rate_limits=RateLimitConfig(enabled=False))) as running:
        yield running


@pytest.fixture
def client(slack: BackgroundSlack) -> WebClient:
    return WebClient(token=slack.bot_token, base_url=slack.api_url)


def plain(text: str) -> Block:
    return {"type": "plain_text", "text": text}


def mrkdwn(text: str) -> Block:
    return {"type": "mrkdwn", "text": text}


def section(text: str) -> Block:
    return {"type": "section", "text": mrkdwn(text)}


def button(action_id: str, *, text: str = "Go", value: str = "v", **more: Any) -> Block:
    return {"type": "button", "action_id": action_id, "text": plain(text), "value": value, **more}


def actions(*elements: Block) -> Block:
    return {"type": "actions", "elements": list(elements)}


def option(i: int, *, text: str = "", value: str = "") -> Block:
    return {"text": plain(text or f"option {i}"), "value": value or f"v{i}"}


def confirm(*, title: str = "Sure?", text: str = "It goes.", yes: str = "Yes", no: str = "No") -> Block:
    return {"title": plain(title), "text": plain(text), "confirm": plain(yes), "deny": plain(no)}


def refusal(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as raised:
        call()
    return dict(raised.value.response.data)


UNION_TEXT = "failed to match all allowed schemas [json-pointer:/blocks/0/text]"
INVALID: dict[str, tuple[list[Block], list[str]]] = {
    "section text over 3000": (
        [section("x" * 3001)],
        [UNION_TEXT, "must be less than 3001 characters [json-pointer:/blocks/0/text/text]"],
    ),
    "empty section text": (
        [section("")],
        [UNION_TEXT, "must be more than 0 characters [json-pointer:/blocks/0/text/text]"],
    ),
    "emoji on mrkdwn": (
        [{"type": "section", "text": {**mrkdwn("hi"), "emoji": True}}],
        [UNION_TEXT, "invalid additional property: emoji [json-pointer:/blocks/0/text]"],
    ),
    "section without text or fields": (
        [{"type": "section", "accessory": button("a")}],
        ["must define either `text` or `fields` [json-pointer:/blocks/0/type]"],
    ),
    "11 section fields": (
        [{"type": "section", "fields": [mrkdwn("f")] * 11}],
        ["no more than 10 items allowed [json-pointer:/blocks/0/fields]"],
    ),
    "header over 150": (
        [{"type": "header", "text": plain("h" * 151)}],
        ["must be less than 151 characters [json-pointer:/blocks/0/text/text]"],
    ),
    "header in mrkdwn": (
        [{"type": "header", "text": mrkdwn("*h*")}],
        ["must be a valid enum value [json-pointer:/blocks/0/text/type]"],
    ),
    "button value over 2000": (
        [actions(button("a", value="v" * 2001))],
        ["must be less than 2001 characters [json-pointer:/blocks/0/elements/0/value]"],
    ),
    "button text over 75": (
        [actions(button("a", text="t" * 76))],
        ["must be less than 76 characters [json-pointer:/blocks/0/elements/0/text/text]"],
    ),
    "button style": (
        [actions(button("a", style="warning"))],
        ["must be a valid enum value [json-pointer:/blocks/0/elements/0/style]"],
    ),
    "confirm title over 100": (
        [actions(button("a", confirm=confirm(title="t" * 101)))],
        ["must be less than 101 characters [json-pointer:/blocks/0/elements/0/confirm/title/text]"],
    ),
    "duplicate action_id": (
        [actions(button("same"), button("same"))],
        ['`action_id` "same" already exists [json-pointer:/blocks/0/elements/1/action_id]'],
    ),
    "26 action elements": (
        [actions(*(button(f"b{i}") for i in range(26)))],
        ["no more than 25 items allowed [json-pointer:/blocks/0/elements]"],
    ),
    "11 context elements": (
        [{"type": "context", "elements": [mrkdwn("c")] * 11}],
        ["no more than 10 items allowed [json-pointer:/blocks/0/elements]"],
    ),
    "unknown block type": (
        [{"type": "banner", "text": plain("x")}],
        ["unsupported type: banner [json-pointer:/blocks/0/type]"],
    ),
    "a block without a type": (
        [{"text": "no type"}],
        ["missing required field: type [json-pointer:/blocks/0]"],
    ),
    "51 blocks": ([{"type": "divider"}] * 51, ["no more than 50 items allowed [json-pointer:/blocks]"]),
    "block_id over 255": (
        [{"type": "divider", "block_id": "b" * 256}],
        ["must be less than 256 characters [json-pointer:/blocks/0/block_id]"],
    ),
    "an element where the block takes none": (
        [actions({"type": "plain_text_input", "action_id": "t"})],
        ["unsupported type: plain_text_input [json-pointer:/blocks/0/elements/0/type]"],
    ),
    "101 select options": (
        [actions({"type": "static_select", "action_id": "s", "options": [option(i) for i in range(101)]})],
        ["no more than 100 items allowed [json-pointer:/blocks/0/elements/0/options]"],
    ),
    "every finding of every block": (
        [{"type": "divider", "colour": "red"}, {"type": "header", "text": plain("h" * 151)}],
        [
            "invalid additional property: colour [json-pointer:/blocks/0]",
            "must be less than 151 characters [json-pointer:/blocks/1/text/text]",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_slack_refuses_the_message_with_its_lines_and_pointers(
    slack: BackgroundSlack, client: WebClient, case: str
) -> None:
    blocks, errors = INVALID[case]
    answer = refusal(lambda: client.chat_postMessage(channel="C_OPS", text=case, blocks=blocks))
    assert answer == {
        "ok": False,
        "error": "invalid_blocks",
        "errors": errors,
        "response_metadata": {"messages": [f"[ERROR] {line}" for line in errors]},
    }
    assert all(m["text"] != case for m in slack.messages("C_OPS")), "nothing was posted"


def test_every_method_that_takes_blocks_checks_them(slack: BackgroundSlack, client: WebClient) -> None:
    bad = [section("x" * 3001)]
    root = client.chat_postMessage(channel="C_GPU", text="root")["ts"]
    calls: list[Callable[[], Any]] = [
        lambda: client.chat_postEphemeral(channel="C_GPU", user="U_ALICE", text="e", blocks=bad),
        lambda: client.chat_update(channel="C_GPU", ts=root, text="u", blocks=bad),
        lambda: client.chat_scheduleMessage(channel="C_GPU", text="s", blocks=bad, post_at=2_000_000_000),
    ]
    assert [refusal(call)["errors"][1] for call in calls] == [
        "must be less than 3001 characters [json-pointer:/blocks/0/text/text]"
    ] * len(calls)
    assert [m["text"] for m in slack.messages("C_GPU")] == ["root"]


@pytest.mark.parametrize("blocks", ["not json", '{"type": "divider"}'])
def test_blocks_that_are_not_a_json_array_are_a_format_error(client: WebClient, blocks: str) -> None:
    assert refusal(lambda: client.chat_postMessage(channel="C_OPS", text="x", blocks=blocks))["error"] == (
        "invalid_blocks_format"
    )


AT_THE_LIMITS: dict[str, list[Block]] = {
    "section text of 3000, 10 fields of 2000, block_id of 255": [
        {
            "type": "section",
            "block_id": "b" * 255,
            "text": mrkdwn("x" * 3000),
            "fields": [plain("f" * 2000)] * 10,
        }
    ],
    "header of 150 with emoji": [{"type": "header", "text": {**plain("h" * 150), "emoji": True}}],
    "25 buttons at their limits, with a confirm at its limits": [
        actions(
            button(
                "a" * 255,
                text="t" * 75,
                value="v" * 2000,
                style="danger",
                url="https://x.example/" + "u" * 2982,
            ),
            *(button(f"b{i}") for i in range(23)),
            button("c", confirm=confirm(title="t" * 100, text="x" * 300, yes="y" * 30, no="n" * 30)),
        )
    ],
    "one action_id in two blocks": [actions(button("same")), actions(button("same"))],
    "10 context elements": [{"type": "context", "elements": [{**mrkdwn("m" * 3000), "verbatim": True}] * 10}],
    "50 blocks": [{"type": "divider"}] * 50,
    "menus and choices at their limits": [
        actions(
            {
                "type": "static_select",
                "action_id": "s",
                "placeholder": plain("p" * 150),
                "options": [option(i, text="t" * 75, value=f"{i:03d}" + "v" * 147) for i in range(100)],
            },
            {"type": "overflow", "action_id": "o", "options": [option(i) for i in range(5)]},
            {
                "type": "checkboxes",
                "action_id": "c",
                "options": [{"text": mrkdwn("*m*"), "value": f"c{i}"} for i in range(10)],
            },
            {"type": "radio_buttons", "action_id": "r", "options": [option(i) for i in range(10)]},
            {"type": "datepicker", "action_id": "d", "initial_date": "2026-01-05"},
        )
    ],
    "an image, a rich text and an input": [
        {
            "type": "image",
            "image_url": "https://x.example/a.png",
            "alt_text": "a" * 2000,
            "title": plain("t"),
        },
        {
            "type": "rich_text",
            "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "x"}]}],
        },
        {
            "type": "input",
            "label": plain("l" * 2000),
            "element": {"type": "plain_text_input", "action_id": "i"},
        },
    ],
}


@pytest.mark.parametrize("case", sorted(AT_THE_LIMITS))
def test_a_message_exactly_at_the_limits_is_posted(
    slack: BackgroundSlack, client: WebClient, case: str
) -> None:
    posted = client.chat_postMessage(channel="C_GPU", text=case, blocks=AT_THE_LIMITS[case])
    assert posted["message"]["blocks"] == AT_THE_LIMITS[case]


@pytest.fixture
def bolt() -> Iterator[tuple[BackgroundSlack, App, SocketModeHandler]]:
    """An emulator of its own with a connected Bolt app, so no other test's socket is in the way."""
    with BackgroundSlack(SlackConfig(rate_limits=RateLimitConfig(enabled=False))) as slack:
        app = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
        handler = SocketModeHandler(app, slack.app_token)
        yield slack, app, handler
        handler.close()  # type: ignore[no-untyped-call]


def test_a_response_url_refuses_bad_blocks_with_a_bare_400(
    bolt: tuple[BackgroundSlack, App, SocketModeHandler],
) -> None:
    slack, app, handler = bolt
    urls: list[str] = []

    @app.command("/gpu")
    def gpu(ack: Ack, command: dict[str, Any]) -> None:
        urls.append(command["response_url"])
        ack()

    handler.connect()  # type: ignore[no-untyped-call]
    slack.wait_for_connections(1)
    slack.type_command("bob", "C_OPS", "/gpu", "status")
    hook = WebhookClient(urls[0])
    refused = hook.send(text="bad", blocks=[{"type": "header", "text": plain("h" * 151)}])
    assert (refused.status_code, refused.body) == (400, "invalid_blocks")
    assert hook.send(text="good", blocks=[section("ok")]).status_code == 200
    assert [e["text"] for e in slack.ephemerals("bob")][-1] == "good"


def test_a_command_acked_with_bad_blocks_shows_slacks_error(
    bolt: tuple[BackgroundSlack, App, SocketModeHandler],
) -> None:
    slack, app, handler = bolt
    app.command("/gpu")(lambda ack: ack(text="help", blocks=[actions(button("same"), button("same"))]))

    handler.connect()  # type: ignore[no-untyped-call]
    slack.wait_for_connections(1)
    delivery = slack.type_command("alice", "C_OPS", "/gpu", "help")
    assert delivery.acked and delivery.shown == "error_notice"
    assert slack.ephemerals("alice")[-1]["text"] == '/gpu failed with the error "invalid_command_response"'
