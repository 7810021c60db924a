"""Block Kit rendering of core notices, against golden JSON, plus Slack's limits and the formatting helpers.

Set GPUBOT_UPDATE_GOLDEN=1 to rewrite the golden files after a deliberate change, then review the diff.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters import slack_render
from bot.core import explain, notices, reminders

GOLDEN = Path(__file__).parent / "golden" / "slack_render"

PROVISIONING = notices.ThreadStatus(
    namespace="gpubot",
    name="alice-train-1",
    owner="U_ALICE",
    image="nvidia/cuda:12.4.1-base-ubuntu22.04",
    gpus=1,
    profile="t4",
    headline="Waiting for node gke-demo-gpu-t4-1a2b to come up with its GPU",
    timeline=(
        "requested " + notices.clock_time(datetime(2026, 1, 5, 12, 30, tzinfo=UTC)),
        "scale-up 0→1 +4s",
    ),
    note="Node likely ready " + notices.clock_time(datetime(2026, 1, 5, 12, 33, tzinfo=UTC)) + ": usually 3m",
    lease_end=datetime(2026, 1, 5, 16, 30, tzinfo=UTC),
    buttons=notices.Buttons(release=True, extend=True),
)
STUCK = notices.ThreadStatus(
    namespace="gpubot",
    name="bob-big",
    owner="U_BOB",
    image="pytorch/pytorch:2.3.0",
    gpus=4,
    profile="a100",
    headline="Waiting for a GPU node: the GPU pool's nodes are all in use",
    problem=explain.Problem(
        "max-size", "the GPU pool is at its maximum size (5 nodes)", "wait, or ask an admin"
    ),
    buttons=notices.Buttons(release=True),
)
FINISHED = notices.ThreadStatus(
    namespace="gpubot",
    name="alice-train-1",
    owner="U_ALICE",
    image="nvidia/cuda:12.4.1-base-ubuntu22.04",
    gpus=1,
    profile="t4",
    headline="Succeeded after 1h02m",
    timeline=("requested " + notices.clock_time(datetime(2026, 1, 5, 11, 0, tzinfo=UTC)), "Running +2m40s"),
    ending="This run held its GPU for 1h02m: 1.03 GPU-hours, ≈ $0.36.",
)
EPISODE = notices.ChannelEpisode(
    pool="gpu-t4",
    headline="back at 0 nodes",
    lines=(
        "scale-up 0→1 for alice's alice-train-1",
        "node Ready after 2m10s",
        "pool at 0 — episode 20m00s, 0.33 GPU-hours, ≈ $0.42",
    ),
    closed=True,
)
WARNING = notices.ChannelEpisode(
    pool="gpu-t4",
    headline="scaling up",
    lines=("scale-up 0→1 for alice-train-1",),
    warning="provisioning takes far longer than usual (12m, usually 2m)",
)

DM_INSTEAD = notices.Reminder(
    ":hourglass_flowing_sand: The lease on `alice-train-1` (1 GPU) ends at 16:30 UTC, in 15m.",
    "gpubot/alice-train-1",
    notices.Buttons(extend=True, release=True),
    thread_channel="C_GPU",
    thread_note=reminders.thread_refused_note("not-member"),
)
"""A reminder sent by DM because its thread's channel no longer has the bot."""

CASES: dict[str, notices.Notice] = {
    "thread_provisioning": PROVISIONING,
    "thread_problem": STUCK,
    "thread_finished": FINISHED,
    "episode_closed": EPISODE,
    "episode_warning": WARNING,
    "reply": notices.Reply("node gke-gpu-t4-1a2b is Ready after 2m10s"),
    "ephemeral": notices.Ephemeral("unknown profile `h100`: try `/gpu run IMAGE --type t4`"),
    "reminder_dm_thread_refused": DM_INSTEAD,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_render_matches_golden(name: str) -> None:
    rendered = slack_render.render(CASES[name])
    got = {"text": rendered.text, "blocks": rendered.blocks}
    path = GOLDEN / f"{name}.json"
    if os.environ.get("GPUBOT_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n")
    assert got == json.loads(path.read_text())


def test_buttons_carry_the_workload_and_the_action_ids() -> None:
    actions = slack_render.render(PROVISIONING).blocks[-1]
    assert actions["type"] == "actions"
    assert [(b["action_id"], b["value"]) for b in actions["elements"]] == [
        ("gpubot_extend", "gpubot/alice-train-1"),
        ("gpubot_release", "gpubot/alice-train-1"),
    ]


def test_no_buttons_once_nothing_can_be_done() -> None:
    assert all(block["type"] != "actions" for block in slack_render.render(FINISHED).blocks)


def test_core_text_cannot_become_markup() -> None:
    rendered = slack_render.render(notices.Reply("<!channel> & <@U_BOB>"))
    assert rendered.text == "&lt;!channel&gt; &amp; &lt;@U_BOB&gt;"
    assert rendered.blocks[0]["text"]["text"] == rendered.text


@pytest.mark.parametrize("length", [0, 1, 2999, 3000, 3001, 9000, 200_000])
def test_long_text_fits_block_kit_limits(length: int) -> None:
    text = "\n".join("x" * 70 for _ in range(length // 71 + 1))[:length] if length < 9000 else "y" * length
    rendered = slack_render.render(notices.Ephemeral(text))
    assert len(rendered.text) <= slack_render.FALLBACK_TEXT_MAX
    assert 1 <= len(rendered.blocks) <= slack_render.MAX_BLOCKS
    assert all(0 < len(block["text"]["text"]) <= slack_render.SECTION_TEXT_MAX for block in rendered.blocks)
    if length <= slack_render.SECTION_TEXT_MAX * slack_render.MAX_BLOCKS:
        assert "".join(b["text"]["text"].replace("\n", "") for b in rendered.blocks).strip() == text.replace(
            "\n", ""
        )


def test_huge_thread_fields_are_clipped() -> None:
    status = notices.ThreadStatus(
        namespace="gpubot", name="n" * 300, owner="U_ALICE", image="i" * 5000, gpus=1, profile="t4",
        headline="h" * 5000, timeline=tuple("s" * 200 for _ in range(40)),
        buttons=notices.Buttons(release=True),
    )  # fmt: skip
    rendered = slack_render.render(status)
    assert len(rendered.text) <= slack_render.FALLBACK_TEXT_MAX
    sections = [b for b in rendered.blocks if b["type"] == "section"]
    assert all(len(b["text"]["text"]) <= slack_render.SECTION_TEXT_MAX for b in sections)
    contexts = [e for b in rendered.blocks if b["type"] == "context" for e in b["elements"]]
    assert contexts and all(len(e["text"]) <= slack_render.SECTION_TEXT_MAX for e in contexts)
    release = rendered.blocks[-1]["elements"][0]
    assert len(release["confirm"]["title"]["text"]) <= 100


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (-3, "0s"), (0.9, "0s"), (45, "45s"), (59.99, "59s"), (60, "1m00s"), (65, "1m05s"),
     (3599, "59m59s"), (3600, "1h00m"), (3725, "1h02m"), (90061, "25h01m")],
)  # fmt: skip
def test_format_elapsed(seconds: float, text: str) -> None:
    assert notices.format_elapsed(seconds) == text


@pytest.mark.parametrize(
    ("dollars", "text"),
    [(0, "$0.00"), (0.001, "<$0.01"), (0.42, "$0.42"), (12.5, "$12.50"), (1234.567, "$1,234.57")],
)
def test_format_cost(dollars: float, text: str) -> None:
    assert notices.format_cost(dollars) == text


def test_format_gpus() -> None:
    assert notices.format_gpus(1, "t4") == "1 GPU (t4)"
    assert notices.format_gpus(4, "a100") == "4 GPUs (a100)"


def test_a_moment_in_text_is_a_date_token_each_reader_sees_in_their_zone() -> None:
    moment = datetime(2026, 1, 5, 16, 30, tzinfo=UTC)
    rendered = slack_render.render(notices.Reply(f"ends {notices.clock_time(moment)} <soon>"))
    token = f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} at {{time}}|Mon 16:30 UTC>"
    assert rendered.text == f"ends {token} &lt;soon&gt;"
    assert notices.moments(f"ends {notices.clock_time(moment)}") == "ends Mon 16:30 UTC"


def test_a_mention_notifies_its_user_and_the_text_stays_escaped() -> None:
    rendered = slack_render.render(notices.Reply("Running <now>", mention="U_ALICE"))
    assert rendered.text == "<@U_ALICE> Running &lt;now&gt;"
    assert rendered.blocks[0]["text"]["text"] == rendered.text


def test_output_is_one_code_block_of_the_last_lines_that_fit() -> None:
    lines = tuple(f"step {i} <ok> & done" for i in range(5000))
    rendered = slack_render.render(notices.Ephemeral("The last 5000 lines of `x`:", lines))
    block = rendered.blocks[-1]
    text = block["text"]["text"]
    assert block["block_id"] == "gpubot_output" and len(text) <= slack_render.SECTION_TEXT_MAX
    assert text.startswith("```\n") and text.endswith("\nstep 4999 &lt;ok&gt; &amp; done\n```")
    assert text.count("```") == 2 and "step 0 " not in text


def test_a_fence_in_the_output_cannot_end_the_block_and_a_huge_line_keeps_its_end() -> None:
    fenced = slack_render.code_block(("```", "after"))
    assert fenced.count("```") == 2 and fenced.endswith("after\n```")
    huge = slack_render.code_block(("x" * 10_000 + "END",))
    assert len(huge) <= slack_render.SECTION_TEXT_MAX and huge.endswith("END\n```")


def test_code_block_fits_says_whether_every_line_is_shown_whole() -> None:
    def shown(lines: tuple[str, ...]) -> int:
        return slack_render.code_block(lines).count("\n") - 1

    short = tuple(str(n) for n in range(400))
    assert slack_render.code_block_fits(short) and shown(short) == 400
    escaped = tuple("<" * 25 for _ in range(40))  # 1,000 characters typed, 4,000 once escaped
    assert not slack_render.code_block_fits(escaped) and shown(escaped) < 40
    for width in range(1, 400, 7):
        lines = ("y" * width,) * (2992 // (width + 1))
        assert slack_render.code_block_fits(lines) == (shown(lines) == len(lines))
        more = (*lines, "y" * width)
        assert not slack_render.code_block_fits(more) and shown(more) < len(more)
    assert not slack_render.code_block_fits(("x" * 3000,)), "a lone line shown only by its end"


def test_the_logs_button_comes_with_its_action_id() -> None:
    status = notices.ThreadStatus(
        "ml", "train-1", "U_ALICE", "img", 1, "t4", "Failed", buttons=notices.Buttons(logs=True)
    )
    (button,) = slack_render.render(status).blocks[-1]["elements"]
    assert (button["action_id"], button["value"]) == (slack_render.LOGS_ACTION, "ml/train-1")
