"""The job's side of a run: its output in the thread when it fails, `/gpu logs`, the Logs button, mentions,
and output longer than a screen sent whole as a file to the asker's DMs.

Against the real bot, the sim's kubelet (which runs `sh -c` scripts' echo/exit, and `seq`) and the Slack
emulator; a file is read back as a Slack client reads it: files.info, then url_private with the bot token.
"""

from __future__ import annotations

import dataclasses
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from slack_sdk import WebClient

from bot import runtime
from bot.adapters import slack_render
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    WAIT,
    Json,
    advance_until,
    bot_settings,
    emulator_config,
    gpubot_pods,
    replies,
    roots,
    running_bot,
)

pytestmark = pytest.mark.usefixtures("slack_env")

CRASHING = f'run {CUDA} --name crashes -- sh -c "echo a; echo b; exit 3"'
CHATTY = f'run {CUDA} --name chatty -- seq -f "step %g: loss 0.25" 5000'
CHATTY_OUTPUT = "".join(f"step {n}: loss 0.25\n" for n in range(1, 5001))
ALICE_DM, BOB_DM = "D_ALICE", "D_BOB"


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
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = crashed_run(sim, slack)
    failed = ending(slack, root)
    assert failed is not None
    assert "the command exited 3. " in failed["text"] and "`/gpu logs crashes` shows more" in failed["text"]
    output = next(b for b in failed["blocks"] if b.get("block_id") == "gpubot_output")
    assert output["text"]["text"] == "```\na\nb\n```"
    assert failed["text"].startswith("<@U_ALICE> "), "the owner is notified when it fails"


def test_the_running_reply_mentions_the_owner_and_other_steps_do_not(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = crashed_run(sim, slack)
    said = replies(slack, root)
    mentioned = [text for text in said if "<@U_ALICE>" in text]
    assert any("Running" in text for text in mentioned) and any("Failed" in text for text in mentioned)
    assert all("Running" in text or "Failed" in text for text in mentioned), said


def test_gpu_logs_shows_the_owner_the_output_and_refuses_anyone_else(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
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
    assert not slack.calls("files.getUploadURLExternal"), "an answer that fits sends no file"


def test_the_logs_button_on_a_finished_run_shows_its_output(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = crashed_run(sim, slack)
    slack.wait_until(
        lambda: any(slack_render.LOGS_ACTION in str(m["blocks"]) for m in roots(slack)), timeout=WAIT
    )
    assert slack.click_button("U_ALICE", "C_GPU", root["ts"], slack_render.LOGS_ACTION).acked
    (answer,) = slack.wait_until(lambda: [e for e in slack.ephemerals("U_ALICE") if "lines of" in e["text"]])
    assert "`crashes` (Failed)" in answer["text"]


# -- output longer than a screen: a file in the asker's DMs -------------------------------------------


def chatty_run(sim: world.BackgroundWorld, slack: BackgroundSlack) -> None:
    """A run that prints 5,000 lines and succeeds."""
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", CHATTY).acked
    advance_until(
        sim, slack, lambda: [p for p in gpubot_pods(sim) if p["status"].get("phase") == "Succeeded"]
    )


def answer_to(slack: BackgroundSlack, user: str, words: str) -> Json:
    (answer,) = slack.wait_until(
        lambda: [e for e in slack.ephemerals(user) if words in e["text"]], timeout=WAIT
    )
    return answer


def shown_output(ephemeral: Json) -> str:
    return str(next(b for b in ephemeral["blocks"] if b.get("block_id") == "gpubot_output")["text"]["text"])


def read_as_a_client(slack: BackgroundSlack, file_id: str) -> bytes:
    """What a Slack client downloads: files.info's url_private, with the bot token."""
    info = WebClient(token=slack.bot_token, base_url=slack.api_url).files_info(file=file_id)["file"]
    request = urllib.request.Request(
        info["url_private"], headers={"Authorization": f"Bearer {slack.bot_token}"}
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return bytes(response.read())


def test_output_past_a_screen_goes_whole_to_the_askers_dms_and_the_ephemeral_keeps_its_end(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, core: client.CoreV1Api
) -> None:
    chatty_run(sim, slack)
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", "logs chatty --tail 5000").acked
    answer = answer_to(slack, "U_ALICE", "lines of `chatty`")
    assert answer["text"].startswith("The last 50 of 5,000 lines of `chatty` (Succeeded):")
    assert "All 5,000 lines went to your DMs as a file, `chatty.log`." in answer["text"]
    excerpt = "\n".join(f"step {n}: loss 0.25" for n in range(4951, 5001))
    assert shown_output(answer) == f"```\n{excerpt}\n```"

    (shared,) = slack.wait_until(lambda: [m for m in slack.messages(ALICE_DM) if m.get("files")])
    assert "`chatty`" in shared["text"] and "5,000 lines" in shared["text"]
    (file,) = shared["files"]
    assert (file["name"], file["title"], file["size"]) == ("chatty.log", "chatty.log", len(CHATTY_OUTPUT))
    content = read_as_a_client(slack, file["id"])
    assert content == CHATTY_OUTPUT.encode()
    assert content.decode() == core.read_namespaced_pod_log("chatty", "default", tail_lines=5000)

    assert slack.type_command("U_BOB", "C_GPU", "/gpu", "logs chatty --tail 5000").acked
    refusal = answer_to(slack, "U_BOB", "chatty")
    assert "only its owner or an admin may read its output" in refusal["text"]
    assert not slack.messages(BOB_DM) and len(slack.calls("files.completeUploadExternal")) == 1


def test_a_tail_asked_past_the_output_sends_what_there_is(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    chatty_run(sim, slack)
    assert slack.type_command("U_ADMIN", "C_GPU", "/gpu", "logs chatty --tail 80").acked
    answer = answer_to(slack, "U_ADMIN", "lines of `chatty`")
    assert answer["text"].startswith("The last 50 of 80 lines of `chatty` (Succeeded): More: `kubectl logs")
    (shared,) = slack.wait_until(lambda: [m for m in slack.messages("D_ADMIN") if m.get("files")])
    assert (
        read_as_a_client(slack, shared["files"][0]["id"]).decode().splitlines()
        == CHATTY_OUTPUT.splitlines()[-80:]
    )
    assert not slack.messages(ALICE_DM), "the file goes to whoever asked: an admin reading alice's run"


@pytest.fixture
def restricted_slack(slack_env: None) -> Iterator[BackgroundSlack]:
    """A workspace whose admins restricted uploads of large files (files.getUploadURLExternal then answers
    file_upload_size_restricted)."""
    with BackgroundSlack(dataclasses.replace(emulator_config(), max_file_bytes=10_000)) as running:
        yield running


def test_a_file_slack_refuses_leaves_the_excerpt_and_says_how_to_read_the_rest(
    sim: world.BackgroundWorld, restricted_slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    slack = restricted_slack
    with running_bot(bot_settings(sim, slack, tmp_path, redis_url), slack):
        chatty_run(sim, slack)
        assert slack.type_command("U_ALICE", "C_GPU", "/gpu", "logs chatty --tail 5000").acked
        answer = answer_to(slack, "U_ALICE", "lines of `chatty`")
    assert answer["text"].startswith("The last 50 of 5,000 lines of `chatty` (Succeeded):")
    assert (
        "I could not send all 5,000 lines as a file (Slack: file_upload_size_restricted)." in answer["text"]
    )
    assert answer["text"].endswith("Read them with `kubectl logs -n default chatty --tail 5000`")
    assert shown_output(answer).endswith("step 5000: loss 0.25\n```")
    assert [c.error for c in slack.calls("files.getUploadURLExternal")] == ["file_upload_size_restricted"]
    assert not [m for m in slack.messages(ALICE_DM) if m.get("files")]
