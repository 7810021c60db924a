"""`gpubot demo --interactive`: what each typed line asks for, and which buttons a user may press."""

from __future__ import annotations

import pytest

from bot.cli import interactive as repl


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600",
            repl.TypeSlash("run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600"),
        ),
        ("  /GPU   status all ", repl.TypeSlash("status all")),
        ("/gpu", repl.TypeSlash("")),
        ("as bob", repl.SwitchUser("U_BOB")),
        ("as @Admin", repl.SwitchUser("U_ADMIN")),
        ("buttons", repl.Bare.BUTTONS),
        ("click 2", repl.Click(2)),
        ("wait 5m", repl.Wait(300)),
        ("wait 90s", repl.Wait(90)),
        ("wait 90", repl.Wait(90)),
        ("wait 1h30m", repl.Wait(5400)),
        ("pool", repl.Bare.POOL),
        ("help", repl.Bare.HELP),
        ("quit", repl.Bare.QUIT),
        ("exit", repl.Bare.QUIT),
        ("   ", repl.Bare.NOTHING),
    ],
)
def test_lines_ask_for_what_they_say(line: str, expected: repl.Request) -> None:
    assert repl.parse_line(line) == expected


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("frobnicate", "`frobnicate` is not something this demo knows"),
        ("/deploy now", "only /gpu reaches the bot here"),
        ("run nvidia/cuda", "did you mean `/gpu run nvidia/cuda`?"),
        ("as carol", "the users are alice, bob and admin"),
        ("click", "`click` takes a number from `buttons`"),
        ("click 0", "`click` takes a number from `buttons`"),
        ("click one", "`click` takes a number from `buttons`"),
        ("wait", "`wait` takes a time like 90s, 5m or 1h30m"),
        ("wait 0s", "`wait` takes a time like 90s, 5m or 1h30m"),
        ("wait soon", "`wait` takes a time like 90s, 5m or 1h30m"),
        ("wait -5m", "`wait` takes a time like 90s, 5m or 1h30m"),
        ("wait 7h", "wait at most 6h at a time"),
        ("pool everything", "`pool` is not something this demo knows"),
    ],
)
def test_other_lines_get_a_one_line_hint(line: str, hint: str) -> None:
    parsed = repl.parse_line(line)
    assert isinstance(parsed, repl.Hint)
    assert parsed.text.startswith(hint)
    assert "\n" not in parsed.text


@pytest.mark.parametrize(("seconds", "steps"), [(5, [5]), (12, [5, 5, 2]), (3, [3]), (60, [5] * 12)])
def test_the_clock_moves_in_small_steps(seconds: int, steps: list[int]) -> None:
    assert repl.clock_steps(seconds) == steps


@pytest.mark.parametrize(("seconds", "shown"), [(90, "1m30s"), (300, "5m"), (5400, "1h30m"), (7, "7s")])
def test_durations_read_as_typed(seconds: int, shown: str) -> None:
    assert repl.format_duration(seconds) == shown
    assert repl.parse_duration(shown) == seconds


def button(label: str, action_id: str) -> dict[str, object]:
    return {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": label}}


def test_a_user_sees_channel_buttons_and_only_their_own_ephemerals() -> None:
    release = {**button("Release GPU", "gpubot_release"), "confirm": {"title": {"text": "Release it?"}}}
    snapshot = {
        "channels": [
            {
                "id": "C_GPU",
                "name": "gpu-users",
                "messages": [
                    {
                        "ts": "2.0",
                        "text": "gone",
                        "deleted": True,
                        "blocks": [{"type": "actions", "elements": [button("Old", "old")]}],
                    },
                    {
                        "ts": "1.0",
                        "text": "gpu-u-alice: Running\nmore",
                        "blocks": [
                            {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}},
                            {
                                "type": "actions",
                                "elements": [button("Extend lease", "gpubot_extend"), release],
                            },
                        ],
                    },
                ],
            },
            {
                "id": "D_BOB",
                "name": "bob",
                "is_im": True,
                "user": "U_BOB",
                "messages": [
                    {
                        "ts": "0.5",
                        "text": "dm",
                        "blocks": [{"type": "section", "accessory": button("Bob only", "dm")}],
                    }
                ],
            },
        ],
        "ephemerals": [
            {
                "channel": "C_GPU",
                "message_ts": "3.0",
                "user": "U_ALICE",
                "text": "yours",
                "blocks": [{"type": "actions", "elements": [button("Mine", "mine")]}],
            },
            {
                "channel": "C_GPU",
                "message_ts": "4.0",
                "user": "U_BOB",
                "text": "bob's",
                "blocks": [{"type": "actions", "elements": [button("Not mine", "bobs")]}],
            },
        ],
    }
    alice = repl.list_clickable(snapshot, "U_ALICE")
    assert [(b.label, b.message_ts, b.confirm) for b in alice] == [
        ("Extend lease", "1.0", ""),
        ("Release GPU", "1.0", "Release it?"),
        ("Mine", "3.0", ""),
    ]
    assert alice[1].where == '"gpu-u-alice: Running" in #gpu-users'
    assert alice[2].where.endswith("(only you see it)")
    assert [b.label for b in repl.list_clickable(snapshot, "U_BOB")] == [
        "Bob only",
        "Extend lease",
        "Release GPU",
        "Not mine",
    ]
