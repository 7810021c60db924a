"""Modals, App Home and the everyday methods the emulator serves beside chat.*, through the real slack_sdk
and slack-bolt on loopback: views checked as Slack checks them, conversations.list, users.list,
chat.getPermalink, reactions.add, chat.scheduleMessage, and docs/sim.md naming every method served.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sim.slack import emulator, webapi
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack

pytestmark = pytest.mark.usefixtures("slack_env")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sim.md"


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    config = SlackConfig(
        rate_limits=RateLimitConfig(enabled=False),
        channels=(
            ("C_GPU", "gpu-users"),
            ("C_OPS", "gpu-ops"),
            ("C_SECRET", "secret"),
            ("C_HIDDEN", "hidden"),
        ),
    )
    with BackgroundSlack(config) as running:
        running.change_channel("C_SECRET", private=True)
        running.change_channel("C_HIDDEN", private=True, bot_member=False)
        yield running


@pytest.fixture
def client(slack: BackgroundSlack) -> WebClient:
    return WebClient(token=slack.bot_token, base_url=slack.api_url)


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def modal(title: str = "Run a job", **more: Any) -> dict[str, Any]:
    blocks = [
        {"type": "input", "block_id": "image", "label": plain("Image"),
         "element": {"type": "plain_text_input", "action_id": "image", "placeholder": plain("e.g. pytorch")}},
        {"type": "input", "block_id": "gpus", "label": plain("GPUs"),
         "element": {"type": "number_input", "action_id": "gpus", "is_decimal_allowed": False,
                     "min_value": "1"}},
        {"type": "input", "block_id": "profile", "label": plain("Type"), "optional": True,
         "element": {"type": "static_select", "action_id": "profile",
                     "options": [{"text": plain(p), "value": p} for p in ("t4", "a100")]}},
        {"type": "input", "block_id": "notify", "label": plain("Tell me"),
         "element": {"type": "checkboxes", "action_id": "notify",
                     "options": [{"text": {"type": "mrkdwn", "text": "*when Ready*"}, "value": "ready"}]}},
    ]  # fmt: skip
    return {"type": "modal", "title": plain(title), "submit": plain("Run"), "close": plain("Cancel"),
            "callback_id": "run", "private_metadata": "C_GPU", "blocks": blocks, **more}  # fmt: skip


def refusal(call: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as raised:
        call()
    return dict(raised.value.response.data)


def opened_modal(slack: BackgroundSlack) -> tuple[WebClient, dict[str, Any], dict[str, Any]]:
    """A user types /gpu and the Bolt app opens a modal with the trigger, then pushes a second one."""
    app = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
    handler = SocketModeHandler(app, slack.app_token)
    views: list[dict[str, Any]] = []

    @app.command("/gpu")
    def gpu(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        views.append(client.views_open(trigger_id=body["trigger_id"], view=modal())["view"])
        views.append(client.views_push(trigger_id=body["trigger_id"], view=modal("Confirm"))["view"])

    handler.connect()  # type: ignore[no-untyped-call]
    try:
        slack.wait_for_connections(1)
        slack.type_command("alice", "C_GPU", "/gpu", "run")
        slack.wait_until(lambda: len(slack.calls("views.push")) == 1)
    finally:
        handler.close()  # type: ignore[no-untyped-call]
    assert len(views) == 2, [c.error for c in slack.calls()]
    return WebClient(token=slack.bot_token, base_url=slack.api_url), views[0], views[1]


def test_a_modal_opens_stacks_and_updates(slack: BackgroundSlack) -> None:
    client, first, pushed = opened_modal(slack)
    assert first["title"]["text"] == "Run a job" and first["root_view_id"] == first["id"]
    assert (pushed["previous_view_id"], pushed["root_view_id"]) == (first["id"], first["id"])
    updated = client.views_update(view_id=first["id"], hash=first["hash"], view=modal("Run it"))["view"]
    assert (updated["id"], updated["title"]["text"]) == (first["id"], "Run it")
    stale = refusal(lambda: client.views_update(view_id=first["id"], hash=first["hash"], view=modal()))
    assert stale["error"] == "hash_conflict"
    assert refusal(lambda: client.views_update(view_id="V_NOPE", view=modal()))["error"] == "not_found"


BAD_MODALS: list[tuple[dict[str, Any], list[str]]] = [
    (modal("t" * 25), ["must be less than 25 characters [json-pointer:/view/title/text]"]),
    (modal(submit=plain("s" * 25)), ["must be less than 25 characters [json-pointer:/view/submit/text]"]),
    (modal(close=plain("c" * 25)), ["must be less than 25 characters [json-pointer:/view/close/text]"]),
    (
        modal(private_metadata="m" * 3001),
        [
            "failed to match all allowed schemas [json-pointer:/view]",
            "must be less than 3001 characters [json-pointer:/view/private_metadata]",
        ],
    ),
    (
        modal(callback_id="c" * 256),
        [
            "failed to match all allowed schemas [json-pointer:/view]",
            "must be less than 256 characters [json-pointer:/view/callback_id]",
        ],
    ),
    (
        {key: value for key, value in modal().items() if key != "submit"},
        ["must define `submit` to use an `input` block in modals [json-pointer:/view/blocks/0/input]"],
    ),
    (
        modal(blocks=[{"type": "divider"}] * 101),
        ["no more than 100 items allowed [json-pointer:/view/blocks]"],
    ),
    (
        modal(blocks=[{"type": "markdown", "text": "**messages only**"}]),
        ["unsupported type: markdown [json-pointer:/view/blocks/0/type]"],
    ),
]


def test_views_that_break_the_rules_answer_invalid_arguments(slack: BackgroundSlack) -> None:
    client, first, _ = opened_modal(slack)
    for view, lines in BAD_MODALS:
        answer = refusal(lambda view=view: client.views_update(view_id=first["id"], view=view))
        assert answer == {
            "ok": False,
            "error": "invalid_arguments",
            "response_metadata": {"messages": [f"[ERROR] {line}" for line in lines]},
        }
    pushed_home = refusal(
        lambda: client.views_push(trigger_id="whatever", view={"type": "home", "blocks": []})
    )
    assert pushed_home["error"] == "invalid_trigger_id", "the trigger is checked before the view"


def test_a_modal_at_every_limit_is_accepted(slack: BackgroundSlack) -> None:
    client, first, _ = opened_modal(slack)
    view = modal("t" * 24, submit=plain("s" * 24), close=plain("c" * 24), private_metadata="m" * 3000,
                 callback_id="c" * 255, blocks=[*modal()["blocks"], *[{"type": "divider"}] * 96])  # fmt: skip
    assert client.views_update(view_id=first["id"], view=view)["view"]["title"]["text"] == "t" * 24


def test_app_home_is_published_per_user_and_checked(client: WebClient) -> None:
    home = {"type": "home", "blocks": [{"type": "header", "text": plain("GPU pool")}] * 100}
    published = client.views_publish(user_id="U_ALICE", view=home)["view"]
    again = client.views_publish(user_id="U_ALICE", view=home, hash=published["hash"])["view"]
    assert again["id"] == published["id"] and again["type"] == "home"
    too_long = {"type": "home", "blocks": [{"type": "header", "text": plain("h" * 151)}]}
    assert refusal(lambda: client.views_publish(user_id="U_ALICE", view=too_long))["response_metadata"] == {
        "messages": ["[ERROR] must be less than 151 characters [json-pointer:/view/blocks/0/text/text]"]
    }
    assert refusal(lambda: client.views_publish(user_id="U_NOPE", view=home))["error"] == "invalid_arguments"


# -- the directory -------------------------------------------------------------------------------
def test_conversations_list_shows_what_a_bot_token_sees(client: WebClient) -> None:
    dm = client.conversations_open(users="U_BOB")["channel"]["id"]
    public = client.conversations_list()["channels"]
    assert [c["id"] for c in public] == ["C_GPU", "C_OPS"]
    everything = client.conversations_list(types="public_channel,private_channel,im")["channels"]
    assert [c["id"] for c in everything] == ["C_GPU", "C_OPS", "C_SECRET", dm], (
        "not the private one it is not in"
    )
    first = client.conversations_list(limit=1)
    following = client.conversations_list(limit=1, cursor=first["response_metadata"]["next_cursor"])
    assert [c["id"] for c in first["channels"] + following["channels"]] == ["C_GPU", "C_OPS"]
    assert following["response_metadata"]["next_cursor"] == ""
    assert refusal(lambda: client.conversations_list(cursor="nonsense"))["error"] == "invalid_cursor"
    assert (
        refusal(lambda: client.conversations_list(types="public_channel,channels"))["error"]
        == "invalid_types"
    )


def test_users_list_pages_through_every_member(client: WebClient) -> None:
    pages = [list(page["members"]) for page in client.users_list(limit=2)]  # slack_sdk reuses one response
    assert [len(page) for page in pages] == [2, 2]
    members = {m["id"]: m for page in pages for m in page}
    assert set(members) == {"U_ALICE", "U_BOB", "U_ADMIN", "U_GPUBOT"} and members["U_GPUBOT"]["is_bot"]


# -- messages: permalinks, reactions, scheduling -----------------------------------------------------
def test_permalinks_name_the_message_and_its_thread(client: WebClient) -> None:
    root = client.chat_postMessage(channel="C_GPU", text="root")["ts"]
    reply = client.chat_postMessage(channel="C_GPU", text="reply", thread_ts=root)["ts"]
    link = client.chat_getPermalink(channel="C_GPU", message_ts=root)["permalink"]
    assert link == f"https://gpulab.slack.com/archives/C_GPU/p{root.replace('.', '')}"
    threaded = client.chat_getPermalink(channel="C_GPU", message_ts=reply)["permalink"]
    assert threaded.endswith(f"/p{reply.replace('.', '')}?thread_ts={root}&cid=C_GPU")
    assert refusal(lambda: client.chat_getPermalink(channel="C_GPU", message_ts="1.2"))["error"] == (
        "message_not_found"
    )


def test_reactions_are_added_once(slack: BackgroundSlack, client: WebClient) -> None:
    ts = client.chat_postMessage(channel="C_GPU", text="node Ready")["ts"]
    assert client.reactions_add(channel="C_GPU", timestamp=ts, name="white_check_mark")["ok"]
    [shown] = client.conversations_history(channel="C_GPU")["messages"]
    assert shown["reactions"] == [{"name": "white_check_mark", "users": ["U_GPUBOT"], "count": 1}]
    assert ":white_check_mark: 1" in slack.render_text()
    errors = [
        refusal(lambda: client.reactions_add(channel="C_GPU", timestamp=ts, name="white_check_mark")),
        refusal(lambda: client.reactions_add(channel="C_GPU", timestamp=ts, name=":tada:")),
        refusal(lambda: client.reactions_add(channel="C_GPU", timestamp="1.2", name="tada")),
    ]
    assert [e["error"] for e in errors] == ["already_reacted", "invalid_name", "message_not_found"]


def test_a_scheduled_message_is_posted_at_its_time(slack: BackgroundSlack, client: WebClient) -> None:
    root = client.chat_postMessage(channel="C_GPU", text="lease")["ts"]
    post_at = int(time.time()) + 1
    scheduled = client.chat_scheduleMessage(
        channel="C_GPU", text="lease ends soon", post_at=post_at, thread_ts=root
    )
    assert scheduled["post_at"] == str(post_at) and scheduled["scheduled_message_id"].startswith("Q")
    assert scheduled["message"]["type"] == "delayed_message"
    assert [m["text"] for m in slack.messages("C_GPU")] == ["lease"], "not before its time"
    reply = slack.wait_until(lambda: [m for m in slack.messages("C_GPU") if m["thread_ts"] == root])
    assert reply[0]["text"] == "lease ends soon" and float(reply[0]["ts"]) >= post_at
    past = refusal(
        lambda: client.chat_scheduleMessage(channel="C_GPU", text="x", post_at=int(time.time()) - 5)
    )
    far = refusal(
        lambda: client.chat_scheduleMessage(channel="C_GPU", text="x", post_at=int(time.time()) + 200 * 86400)
    )
    assert (past["error"], far["error"]) == ("time_in_past", "time_too_far")


def test_docs_list_every_method_the_emulator_serves() -> None:
    served = set(emulator.BOT_METHODS) | set(webapi.APP_METHODS)
    section = DOCS.read_text().split("### Web API methods served", 1)[1].split("\n#", 1)[0]
    named = set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))
    assert served <= named, f"missing from docs/sim.md: {sorted(served - named)}"
    assert named <= served, f"listed but not served: {sorted(named - served)}"
