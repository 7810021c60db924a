"""Users of other workspaces, and modal submissions, as the emulator sends them to a real Bolt app.

Slack user ids are unique only within a workspace, so the emulator can act as `U_ALICE` of another team;
each payload names the workspace and the Enterprise Grid org in the fields Slack's references show
(api.slack.com/interactivity/slash-commands, api.slack.com/reference/interaction-payloads/block-actions,
api.slack.com/reference/interaction-payloads/views).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from slack_bolt import Ack, App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient

from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import Identity, Team

pytestmark = pytest.mark.usefixtures("slack_env")

OTHER = Team("T_OTHER", "othercorp")
GRID = Team("T_SISTER", "sister", enterprise_id="E_ACME", enterprise_name="Acme")
FOREIGN_GRID = Team("T_RIVAL", "rival", enterprise_id="E_RIVAL", enterprise_name="Rival")
BUTTON = [
    {
        "type": "actions",
        "block_id": "controls",
        "elements": [
            {"type": "button", "action_id": "go", "text": {"type": "plain_text", "text": "Go"}, "value": "x"}
        ],
    }
]
MODAL = {
    "type": "modal",
    "callback_id": "ask",
    "title": {"type": "plain_text", "text": "Ask"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "hours",
            "label": {"type": "plain_text", "text": "Hours"},
            "element": {"type": "plain_text_input", "action_id": "hours_input"},
        }
    ],
}


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    identity = Identity(enterprise_id="E_ACME", enterprise_name="Acme")
    with BackgroundSlack(
        SlackConfig(identity=identity, rate_limits=RateLimitConfig(enabled=False))
    ) as running:
        yield running


@pytest.fixture
def app(slack: BackgroundSlack) -> Iterator[tuple[App, list[dict[str, Any]]]]:
    """A Bolt app over Socket Mode that records each body and acks commands and clicks plainly."""
    bolt = App(client=WebClient(token=slack.bot_token, base_url=slack.api_url))
    seen: list[dict[str, Any]] = []

    @bolt.command("/gpu")
    def command(ack: Ack, body: dict[str, Any]) -> None:
        seen.append(body)
        ack()

    @bolt.action("go")
    def click(ack: Ack, body: dict[str, Any]) -> None:
        seen.append(body)
        ack()

    handler = SocketModeHandler(bolt, slack.app_token)
    handler.connect()  # type: ignore[no-untyped-call]
    slack.wait_for_connections(1)
    yield bolt, seen
    handler.close()  # type: ignore[no-untyped-call]


def test_auth_test_names_the_grid_org(slack: BackgroundSlack) -> None:
    answer = WebClient(token=slack.bot_token, base_url=slack.api_url).auth_test()
    assert (answer["team_id"], answer["enterprise_id"], answer["is_enterprise_install"]) == (
        "T_GPULAB",
        "E_ACME",
        False,
    )


def test_a_command_names_the_workspace_and_org_the_user_typed_it_in(
    slack: BackgroundSlack, app: tuple[App, list[dict[str, Any]]]
) -> None:
    _, seen = app
    slack.type_command("alice", "C_GPU", "/gpu", "status")
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status", team=OTHER)
    slack.type_command("U_EVE", "C_GPU", "/gpu", "status", team=FOREIGN_GRID)
    ours, other, rival = seen
    assert (ours["team_id"], ours["enterprise_id"], ours["user_id"]) == ("T_GPULAB", "E_ACME", "U_ALICE")
    assert (other["team_id"], other["team_domain"], other["user_id"]) == ("T_OTHER", "othercorp", "U_ALICE")
    assert "enterprise_id" not in other  # outside Grid, Slack leaves the org fields out
    assert (rival["team_id"], rival["enterprise_id"], rival["enterprise_name"]) == (
        "T_RIVAL",
        "E_RIVAL",
        "Rival",
    )
    assert rival["user_name"] == "u_eve"


def test_a_click_names_the_user_team_and_org(
    slack: BackgroundSlack, app: tuple[App, list[dict[str, Any]]]
) -> None:
    _, seen = app
    posted = WebClient(token=slack.bot_token, base_url=slack.api_url).chat_postMessage(
        channel="C_GPU", text="go", blocks=BUTTON
    )
    slack.click_button("U_ALICE", "C_GPU", posted["ts"], "go", team=GRID)
    slack.click_button("U_ALICE", "C_GPU", posted["ts"], "go", team=OTHER)
    sister, other = seen
    assert sister["team"] == {
        "id": "T_SISTER",
        "domain": "sister",
        "enterprise_id": "E_ACME",
        "enterprise_name": "Acme",
    }
    assert sister["user"]["team_id"] == "T_SISTER" and sister["enterprise"] == {
        "id": "E_ACME",
        "name": "Acme",
    }
    assert other["team"] == {"id": "T_OTHER", "domain": "othercorp"} and other["enterprise"] is None
    assert other["user"] == {"id": "U_ALICE", "username": "alice", "name": "alice", "team_id": "T_OTHER"}


def opened(slack: BackgroundSlack, bolt: App) -> dict[str, Any]:
    """Alice's /gpu opens MODAL with its trigger, as an app does."""
    trigger = slack.type_command("alice", "C_GPU", "/gpu", "ask").payload["trigger_id"]
    return dict(bolt.client.views_open(trigger_id=trigger, view=MODAL)["view"])


def test_a_submission_carries_the_typed_values_and_its_ack_decides_what_the_modal_does(
    slack: BackgroundSlack, app: tuple[App, list[dict[str, Any]]]
) -> None:
    bolt, seen = app
    answers = [{"response_action": "errors", "errors": {"hours": "A whole number, please"}}, None]

    @bolt.view("ask")
    def submitted(ack: Ack, body: dict[str, Any]) -> None:
        seen.append(body)
        answer = answers.pop(0)
        ack(**answer) if answer else ack()

    view = opened(slack, bolt)
    refused = slack.submit_view("U_ALICE", view["id"], {"hours": "lots"}, team=FOREIGN_GRID)
    assert refused.shown == "errors" and [v["id"] for v in slack.open_views()] == [view["id"]]
    body = seen[-1]
    assert body["type"] == "view_submission" and body["view"]["callback_id"] == "ask"
    assert body["view"]["state"]["values"] == {
        "hours": {"hours_input": {"type": "plain_text_input", "value": "lots"}}
    }
    assert (body["team"]["id"], body["user"]["team_id"], body["enterprise"]["id"]) == (
        "T_RIVAL",
        "T_RIVAL",
        "E_RIVAL",
    )
    assert body["view"]["app_installed_team_id"] == "T_GPULAB"
    assert slack.submit_view("alice", view["id"], {"hours": "2"}).shown == "closed"
    assert slack.open_views() == []
    with pytest.raises(LookupError, match="no open modal"):
        slack.submit_view("alice", view["id"])


def test_control_endpoints_act_as_another_team(
    slack: BackgroundSlack, app: tuple[App, list[dict[str, Any]]]
) -> None:
    _, seen = app
    body = {
        "user": "U_ALICE",
        "channel": "C_GPU",
        "command": "/gpu",
        "text": "status",
        "team": {"id": "T_OTHER"},
    }
    request = urllib.request.Request(
        f"{slack.url}/emulator/v1/command", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request) as answer:
        assert json.load(answer)["ok"] is True
    assert seen[-1]["team_id"] == "T_OTHER"
