"""The Slack app manifest: Socket Mode, `/gpu`, interactivity, and exactly the scopes the code needs.

The scopes are derived from the Web API methods bot/ and handlers/ call, so a new method without its scope
fails here instead of as `missing_scope` in a workspace.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from slack_sdk import WebClient

from bot.core import commands
from handlers import gpu, home
from tests.deploy import chart

MANIFEST = chart.ROOT / "deploy" / "slack-app-manifest.yaml"
HISTORY_SCOPES = ("channels:history", "groups:history", "im:history")
"""conversations.replies and .history need the history scope of the conversation's type (public channel,
private channel, DM; docs.slack.dev/reference/methods/conversations.replies); gpubot reads threads in its
channels and its DMs, never group DMs."""
SCOPE_OF_METHOD: dict[str, str | tuple[str, ...] | None] = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_delete": "chat:write",
    "conversations_open": "im:write",
    "conversations_replies": HISTORY_SCOPES,
    "conversations_history": HISTORY_SCOPES,
    "files_upload_v2": "files:write",
    "users_info": "users:read",
    "views_publish": None,
    "views_open": None,  # docs.slack.dev/reference/methods/views.open: "No scope required"
    "auth_test": None,
}
"""WebClient method → the bot scope Slack's docs require for it (None: no scope)."""
_ATTRIBUTE = re.compile(r"\.([a-z]+_[A-Za-z0-9_]+)\(")


def manifest() -> dict[str, Any]:
    loaded = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def web_api_methods_called() -> set[str]:
    sources = [*(chart.ROOT / "bot").rglob("*.py"), *(chart.ROOT / "handlers").rglob("*.py")]
    text = "\n".join(path.read_text(encoding="utf-8") for path in sorted(sources))
    return {name for name in _ATTRIBUTE.findall(text) if hasattr(WebClient, name) and name != "api_call"}


def test_the_scan_finds_the_outbox_methods() -> None:
    assert {"chat_postMessage", "chat_update", "conversations_open"} <= web_api_methods_called()


def test_the_bot_scopes_are_exactly_what_the_code_calls_plus_commands() -> None:
    called = web_api_methods_called()
    unknown = called - set(SCOPE_OF_METHOD)
    assert not unknown, f"the code calls {sorted(unknown)}: add each with its scope to SCOPE_OF_METHOD"
    needed = {"commands"}
    for method in called:
        scopes = SCOPE_OF_METHOD[method]
        needed |= {scopes} if isinstance(scopes, str) else set(scopes or ())
    assert set(manifest()["oauth_config"]["scopes"]["bot"]) == needed
    assert "user" not in manifest()["oauth_config"]["scopes"], "gpubot acts as its bot user only"


def test_socket_mode_and_interactivity_are_on() -> None:
    settings = manifest()["settings"]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True
    assert "request_url" not in settings["interactivity"], "Socket Mode delivers button clicks itself"


def test_the_home_tab_is_on_with_its_event_and_no_other_event() -> None:
    """views.publish and app_home_opened need no scope (docs.slack.dev/reference/methods/views.publish,
    api.slack.com/events/app_home_opened), so the Home tab adds no line to the scopes above."""
    loaded = manifest()
    assert loaded["features"]["app_home"]["home_tab_enabled"] is True
    assert loaded["settings"]["event_subscriptions"]["bot_events"] == [home.EVENT]


def test_the_slash_command_is_the_one_the_handler_registers_with_a_usage_hint() -> None:
    (command,) = manifest()["features"]["slash_commands"]
    assert command["command"] == gpu.COMMAND
    assert "url" not in command, "Socket Mode delivers slash commands itself"
    assert 0 < len(command["description"]) <= 100
    hint = command["usage_hint"]
    assert all(name in hint for name in commands.USAGES), f"the hint should name every command: {hint}"
    assert manifest()["features"]["bot_user"]["display_name"]


def test_the_display_texts_fit_slacks_limits() -> None:
    info = manifest()["display_information"]
    assert 0 < len(info["name"]) <= 35 and len(info["description"]) <= 140
    assert 175 <= len(info["long_description"]) <= 4000
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", info["background_color"])
