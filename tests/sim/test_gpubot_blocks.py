"""Every kind of message gpubot sends, rendered by its real renderer and checked by the Slack emulator's
Block Kit validator, with ordinary inputs and with the longest the cluster and users can produce.

The product never imports the sim; this test imports both, as tests may.
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime

import pytest

from bot.adapters import slack_render
from bot.core import explain, notices, reminders
from sim.slack import blockkit, schema

LONG = "<&>`*_~ " * 1000
"""8,000 characters that escaping grows to 20,000: markup, a code fence's backtick, emphasis."""
NAME, NAMESPACE = "n" * 253, "s" * 63
"""Kubernetes' longest pod name (a DNS subdomain) and namespace (a DNS label)."""
ALL_BUTTONS = [notices.Buttons(*flags) for flags in itertools.product((False, True), repeat=6)]


def statuses() -> list[notices.Notice]:
    ordinary = notices.ThreadStatus(
        namespace="gpubot",
        name="alice-train-1",
        owner="U_ALICE",
        image="nvidia/cuda:12.4.1-base-ubuntu22.04",
        gpus=1,
        profile="t4",
        headline="Waiting for node gke-gpu-t4-1a2b to come up with its GPU",
        timeline=("requested \ue0001767616200\ue001", "scale-up 0→1 +4s"),
        lease_end=datetime(2026, 1, 5, 16, 30, tzinfo=UTC),
        note="usually ready in about 4 minutes",
    )
    longest = notices.ThreadStatus(
        namespace=NAMESPACE,
        name=NAME,
        owner="U" + "A" * 20,
        image="registry.example/" + "i" * 4000,
        gpus=8,
        profile="p" * 63,
        headline=LONG,
        timeline=tuple(LONG for _ in range(60)),
        problem=explain.Problem("max-size", LONG, LONG),
        ending=LONG,
        lease_end=datetime(2026, 1, 5, tzinfo=UTC),
    )
    finished = notices.ThreadStatus(
        namespace="ml",
        name="x",
        owner="",
        image="busybox",
        gpus=1,
        profile="t4",
        headline="Succeeded after 1h02m",
        ending="This run held its GPU for 1h02m: 1.03 GPU-hours, ≈ $0.36.",
    )
    with_buttons = [notices.ThreadStatus(**{**vars(longest), "buttons": buttons}) for buttons in ALL_BUTTONS]
    running = dataclasses.replace(
        ordinary,
        headline="Running on gke-gpu-t4-1a2b",
        connect=notices.Connect(
            shell="kubectl exec -it -n gpubot alice-train-1 -- sh",
            forward="kubectl port-forward -n gpubot pod/alice-train-1 8888:8888",
            url="http://127.0.0.1:8888/lab?token=36561105e4ff1e78a40f3a76f48f0c89650caca5c209602c",
        ),
    )
    ports = " ".join(f"{port}:{port}" for port in range(65528, 65536))
    longest_connect = dataclasses.replace(
        longest,
        connect=notices.Connect(
            shell=f"kubectl exec -it -n {NAMESPACE} {NAME} -- sh",
            forward=f"kubectl port-forward -n {NAMESPACE} pod/{NAME} {ports}",
            url="http://127.0.0.1:65535/" + LONG[:4000] + "?token=" + "a" * 4000,
        ),
    )
    return [ordinary, longest, finished, *with_buttons, running, longest_connect]


def everything_else() -> list[notices.Notice]:
    output = tuple(f"step {i} {LONG[: i % 3000]}" for i in range(5000))
    return [
        notices.Reply("node gke-gpu-t4-1a2b is Ready after 2m10s"),
        notices.Reply(LONG * 40, mention="U_ALICE"),
        notices.Reply("Failed (exit code 1)", output=output, mention="U" + "B" * 20),
        notices.Reply("", output=("```", "x" * 10_000)),
        notices.Ephemeral(""),
        notices.Ephemeral("unknown profile `h100`: try `/gpu run IMAGE --type t4`"),
        notices.Ephemeral(LONG * 40, output=output),
        notices.Ephemeral("\n" * 10_000),
        *(
            notices.Reminder(text, f"{NAMESPACE}/{NAME}", buttons, thread_channel=channel, thread_note=note)
            for text, buttons, (channel, note) in itertools.product(
                (":hourglass_flowing_sand: The lease on `train` ends in 15m.", LONG * 40),
                ALL_BUTTONS,
                (
                    ("", ""),
                    ("C_GPU", ""),
                    ("C_GPU", reminders.thread_refused_note("not-member")),
                    ("", reminders.thread_refused_note("archived")),
                ),
            )
        ),
        notices.ChannelEpisode("gpu-t4", "back at 0 nodes", ("scale-up 0→1", "node Ready"), closed=True),
        notices.ChannelEpisode("p" * 300, LONG, tuple(LONG for _ in range(200)), warning=LONG),
        *usage_reports(),
    ]


def usage_reports() -> list[notices.UsageReport]:
    rows = tuple((f"U{i:010d}", LONG[: i % 300]) for i in range(1000))
    return [
        notices.UsageReport("Your spend this week, since Monday 30 Nov (UTC)", ("$12.40 · 5.0 GPU-hours",)),
        notices.UsageReport(LONG, (LONG,) * 50, by_user=rows, by_channel=rows, note=LONG),
    ]


def homes() -> list[notices.Home]:
    item = notices.HomeWorkload(
        "• `train-1` — Running", "ml/train-1", notices.Buttons(release=True, extend=True)
    )
    longest = notices.HomeWorkload(LONG, f"{NAMESPACE}/{NAME}", notices.Buttons(release=True, extend=True))
    spend = usage_reports()[0]
    return [
        notices.Home((), spend, ()),
        notices.Home((item,), spend, ("• gpu-pool: 1 node(s) ready · no line",), ("Weekdays 08:00",), spend),
        notices.Home(
            (longest,) * 300,
            usage_reports()[1],
            (LONG,) * 300,
            (LONG,) * 300,
            usage_reports()[1],
            updated=datetime(2026, 12, 6, tzinfo=UTC),
            problem=LONG,
        ),
    ]


@pytest.mark.parametrize("home", homes(), ids=["empty", "ordinary", "longest"])
def test_every_app_home_passes_slacks_view_rules(home: notices.Home) -> None:
    view = slack_render.render_home(home)
    assert schema.format_problems(blockkit.check_view(view)) == []
    assert len(view["blocks"]) <= blockkit.VIEW_BLOCKS_MAX
    block_ids = [b["block_id"] for b in view["blocks"] if "block_id" in b]
    assert len(block_ids) == len(set(block_ids)), "Slack refuses a block_id used twice in one view"


CASES = statuses() + everything_else()


@pytest.mark.parametrize("notice", CASES, ids=[f"{type(n).__name__}-{i}" for i, n in enumerate(CASES)])
def test_every_gpubot_message_passes_slacks_block_kit_rules(notice: notices.Notice) -> None:
    rendered = slack_render.render(notice)
    assert schema.format_problems(blockkit.check_message_blocks(rendered.blocks)) == []


CONTEXT_TEXT = {
    "a thread status note": notices.ThreadStatus(
        "ml", "x", "U_ALICE", "busybox", 1, "t4", "Waiting", note="n" * 3001
    ),
    "a reminder's thread note": notices.Reminder("r", "ml/x", thread_note="n" * 3001),
}


@pytest.mark.parametrize("where", sorted(CONTEXT_TEXT))
def test_context_text_over_3000_characters_is_clipped_to_what_slack_takes(where: str) -> None:
    rendered = slack_render.render(CONTEXT_TEXT[where])
    assert schema.format_problems(blockkit.check_message_blocks(rendered.blocks)) == []
