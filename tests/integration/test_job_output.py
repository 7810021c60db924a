"""The job's side of a run: its output in the thread when it fails, `/gpu logs`, the Logs button, mentions.

Against the real bot, the sim's kubelet (which runs `sh -c` scripts' echo/exit) and the Slack emulator.
"""

from __future__ import annotations

import pytest

from bot import app
from bot.adapters import slack_render
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, Json, advance_until, replies, roots

pytestmark = pytest.mark.usefixtures("slack_env")

CRASHING = f'run {CUDA} --name crashes -- sh -c "echo a; echo b; exit 3"'


def ending(slack: BackgroundSlack, root: Json) -> Json | None:
    return next((m for m in thread(slack, root) if "failed" in m["text"].lower()), None)


def thread(slack: BackgroundSlack, root: Json) -> list[Json]:
    return [m for m in slack.messages(root["channel"]) if m["thread_ts"] == root["ts"]]


def crashed_run(sim: world.BackgroundWorld, slack: BackgroundSlack) -> Json:
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", CRASHING).acked
    slack.wait_until(lambda: roots(slack), timeout=WAIT)
    (root,) = roots(slack)
    advance_until(sim, slack, lambda: ending(slack, root))
    return root


def test_a_failed_run_tells_its_exit_code_its_meaning_and_its_last_lines(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = crashed_run(sim, slack)
    failed = ending(slack, root)
    assert failed is not None
    assert "the command exited 3. " in failed["text"] and "`/gpu logs crashes` shows more" in failed["text"]
    output = next(b for b in failed["blocks"] if b.get("block_id") == "gpubot_output")
    assert output["text"]["text"] == "```\na\nb\n```"
    assert failed["text"].startswith("<@U_ALICE> "), "the owner is notified when it fails"


def test_the_running_reply_mentions_the_owner_and_other_steps_do_not(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = crashed_run(sim, slack)
    said = replies(slack, root)
    mentioned = [text for text in said if "<@U_ALICE>" in text]
    assert any("Running" in text for text in mentioned) and any("Failed" in text for text in mentioned)
    assert all("Running" in text or "Failed" in text for text in mentioned), said


def test_gpu_logs_shows_the_owner_the_output_and_refuses_anyone_else(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    crashed_run(sim, slack)
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", "logs").acked
    (answer,) = slack.wait_until(lambda: [e for e in slack.ephemerals("U_ALICE") if "lines of" in e["text"]])
    assert "The last 2 lines of `crashes`" in answer["text"]
    assert any(b.get("text", {}).get("text") == "```\na\nb\n```" for b in answer["blocks"])

    assert slack.type_command("U_BOB", "C_GPU", "/gpu", "logs crashes").acked
    (refusal,) = slack.wait_until(lambda: [e for e in slack.ephemerals("U_BOB") if "crashes" in e["text"]])
    assert "only its owner or an admin may read its output" in refusal["text"]
    assert not [e for e in slack.ephemerals("U_BOB") if "```" in str(e["blocks"])]


def test_the_logs_button_on_a_finished_run_shows_its_output(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = crashed_run(sim, slack)
    slack.wait_until(
        lambda: any(slack_render.LOGS_ACTION in str(m["blocks"]) for m in roots(slack)), timeout=WAIT
    )
    assert slack.click_button("U_ALICE", "C_GPU", root["ts"], slack_render.LOGS_ACTION).acked
    (answer,) = slack.wait_until(lambda: [e for e in slack.ephemerals("U_ALICE") if "lines of" in e["text"]])
    assert "`crashes` (Failed)" in answer["text"]
