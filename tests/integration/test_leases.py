"""Leases end to end: `/gpu extend`, the Extend and Keep buttons, through real Bolt, the emulator and the sim.

Each test reads back what the cluster holds (the pod's annotations) and what Slack shows (ephemerals,
thread replies, the status message), and checks that a refused change leaves the pod exactly as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot import runtime
from bot.adapters import slack_chat
from bot.core import labels, notices, podspec
from handlers import actions
from sim.cluster import world
from sim.slack import render
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    WAIT,
    Json,
    advance_until,
    bot_settings,
    gpubot_pods,
    headline_is,
    replies,
    roots,
    run_and_wait_for_thread,
    running_bot,
    step_reached,
    wait_for_pods,
)

pytestmark = pytest.mark.usefixtures("slack_env")


@contextlib.contextmanager
def lease_bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str, **reaper: Any
) -> Iterator[runtime.Bot]:
    """The real bot with reaper settings changed; its rounds are an hour apart, so none runs mid-test."""
    base = bot_settings(sim, slack, tmp_path, redis_url)
    changed = dataclasses.replace(base.reaper, interval_seconds=3600, **reaper)
    with running_bot(dataclasses.replace(base, reaper=changed), slack) as running:
        yield running


@pytest.fixture
def quiet_bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[runtime.Bot]:
    with lease_bot(sim, slack, tmp_path, redis_url) as running:
        yield running


def annotations(sim: world.BackgroundWorld) -> dict[str, str]:
    (pod,) = gpubot_pods(sim)
    return dict(pod["metadata"]["annotations"])


def audit(sim: world.BackgroundWorld) -> list[dict[str, str]]:
    records: list[dict[str, str]] = json.loads(annotations(sim)[labels.AUDIT_ANNOTATION])
    return records


def lease_end(sim: world.BackgroundWorld) -> datetime:
    end = podspec.parse_time(annotations(sim)[labels.LEASE_END_ANNOTATION])
    assert end is not None
    return end


def lease_line(message: Json) -> str:
    block = next((b for b in message["blocks"] if b.get("block_id") == "gpubot_facts"), None)
    facts = [render.shown(str(e["text"])) for e in block["elements"]] if block else []  # as a client shows
    return next((fact for fact in facts if fact.startswith("lease ends")), "")


def button_ids(message: Json) -> list[str]:
    row = next((b for b in message["blocks"] if b.get("block_id") == "gpubot_actions"), None)
    return [element["action_id"] for element in row["elements"]] if row else []


def ephemeral_saying(slack: BackgroundSlack, user: str, words: str) -> str:
    found = slack.wait_until(lambda: [e["text"] for e in slack.ephemerals(user) if words in e["text"]])
    return str(found[-1])


def root_showing(slack: BackgroundSlack, words: str) -> Json:
    """The status message once its lease line shows `words`: the tracker re-renders on a pod change."""
    found = slack.wait_until(lambda: [m for m in roots(slack) if words in lease_line(m)], timeout=WAIT)
    return dict(found[0])


def name_of(sim: world.BackgroundWorld) -> str:
    return str(gpubot_pods(sim)[0]["metadata"]["name"])


def hhmm(moment: datetime) -> str:
    """A moment as a client without the reader's time zone shows Slack's date token."""
    return f"{moment:%a %H:%M} UTC"


def token(moment: datetime) -> str:
    """A moment as the bot writes it: Slack's date token, shown in each reader's own time zone."""
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} at {{time}}|{hhmm(moment)}>"


def test_extend_by_command_moves_the_lease_records_it_and_answers_the_idle_warning(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    quiet_bot: runtime.Bot,
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    name, before = name_of(sim), lease_end(sim)
    assert annotations(sim)[labels.LEASE_HOURS_ANNOTATION] == "4"
    quiet_bot.cluster.annotate_pod(  # as the reaper marks an idle warning
        "default", name, {labels.IDLE_WARNED_AT_ANNOTATION: podspec.format_time(before - timedelta(hours=3))}
    )
    caplog.set_level(logging.INFO, logger="gpubot.audit")

    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", "extend 2")
    assert delivery.acked
    told = ephemeral_saying(slack, "U_ALICE", "Extended")
    after = before + timedelta(hours=2)
    assert told == f"Extended `{name}` by 2h: the lease now ends {token(after)}.", told

    notes = annotations(sim)
    assert lease_end(sim) == after and notes[labels.LEASE_HOURS_ANNOTATION] == "6"
    assert notes[labels.IDLE_WARNED_AT_ANNOTATION] == ""  # extending says "I'm using it"
    run, extended = audit(sim)
    assert run["action"] == "run"
    assert {k: v for k, v in extended.items() if k != "at"} == {
        "action": "extend",
        "actor": "U_ALICE",
        "hours": "2",
        "lease_end": podspec.format_time(after),
    }
    assert extended["at"] >= run["at"]
    logged = [r.__dict__["audit"] for r in caplog.records if r.name == "gpubot.audit"]
    assert [(r["action"], r["workload"]) for r in logged] == [("extend", f"default/{name}")]

    reply = f"Extended by its owner (+2h): the lease now ends {token(after)}."
    slack.wait_until(lambda: reply in replies(slack, root), timeout=WAIT)
    shown = root_showing(slack, hhmm(after))
    assert button_ids(shown) == [actions.EXTEND_ACTION, actions.RELEASE_ACTION]


def test_the_extend_button_adds_the_default_lease_as_the_clicker(
    sim: world.BackgroundWorld, slack: BackgroundSlack, quiet_bot: runtime.Bot
) -> None:
    run_and_wait_for_thread(sim, slack)
    root = slack.wait_until(lambda: [r for r in roots(slack) if actions.EXTEND_ACTION in button_ids(r)])[0]
    before = lease_end(sim)

    assert slack.click_button("U_ADMIN", "C_GPU", root["ts"], actions.EXTEND_ACTION).acked
    after = before + timedelta(hours=4)
    said = f"Extended by admin U_ADMIN (+4h): the lease now ends {token(after)}."
    slack.wait_until(lambda: said in replies(slack, root), timeout=WAIT)
    assert ephemeral_saying(slack, "U_ADMIN", "Extended").startswith(f"Extended `{name_of(sim)}` by 4h")
    assert lease_end(sim) == after and annotations(sim)[labels.LEASE_HOURS_ANNOTATION] == "8"
    assert [(r["action"], r["actor"]) for r in audit(sim)] == [("run", "U_ALICE"), ("extend", "U_ADMIN")]
    root_showing(slack, hhmm(after))


def test_another_users_extend_is_refused_and_changes_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, quiet_bot: runtime.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    name, before = name_of(sim), annotations(sim)

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"extend {name} 2")
    told = ephemeral_saying(slack, "U_BOB", "belongs to")
    assert f"`{name}` belongs to" in told and "only its owner or an admin may extend it" in told
    assert "Try: `/gpu status`" in told
    slack.click_button("U_BOB", "C_GPU", root["ts"], actions.EXTEND_ACTION)
    slack.wait_until(lambda: len([e for e in slack.ephemerals("U_BOB") if "belongs to" in e["text"]]) == 2)
    assert annotations(sim) == before
    assert not [r for r in replies(slack, root) if r.startswith("Extended")]


def test_an_extension_past_the_cap_is_refused_with_what_fits_and_changes_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with lease_bot(sim, slack, tmp_path, redis_url, max_lease_hours=4.0, max_total_lease_hours=5.0):
        root = run_and_wait_for_thread(sim, slack)
        name, before = name_of(sim), annotations(sim)

        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"extend {name} 2")
        told = ephemeral_saying(slack, "U_ALICE", "cap")
        assert told == (
            "2h more would pass the 5h cap on a lease's total length; at most 1h more fits.\n"
            f"Try: `/gpu extend {name} 1`"
        )
        assert annotations(sim) == before

        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"extend {name} 1")  # what the refusal offered
        ephemeral_saying(slack, "U_ALICE", f"Extended `{name}` by 1h")
        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"extend {name} 15m")
        full = ephemeral_saying(slack, "U_ALICE", "reached the 5h cap")
        assert full.endswith("Try: `/gpu status`")
        assert [r["action"] for r in audit(sim)] == ["run", "extend"]
        assert len([r for r in replies(slack, root) if r.startswith("Extended")]) == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("extend nope", "There is no gpubot workload `nope`. Try: `/gpu status`"),
        ("extend x -1", "positive number of hours, not -1.\nTry: `/gpu extend x 4`"),
        ("extend x soon", "'soon' is not a number of hours"),
        ("extend", "You have no running workloads to extend. Try: `/gpu status`"),
    ],
)
def test_bad_extend_input_says_what_to_type(
    slack: BackgroundSlack, quiet_bot: runtime.Bot, text: str, says: str
) -> None:
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
    assert delivery.acked
    at_once = delivery.ack_payload["text"] if delivery.ack_payload else ""
    shown = at_once or ephemeral_saying(slack, "U_ALICE", "Try: `")
    assert says in shown and "Try: `" in shown, shown


def test_several_workloads_need_a_name_and_the_refusal_says_which(
    sim: world.BackgroundWorld, slack: BackgroundSlack, quiet_bot: runtime.Bot
) -> None:
    for label in ("one", "two"):
        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} --name {label} -- sleep 3600")
    wait_for_pods(sim, slack, 2)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "extend 3")
    told = ephemeral_saying(slack, "U_ALICE", "say which")
    assert told == "You have 2 workloads (`one`, `two`); say which. Try: `/gpu extend one 3`"


def test_a_finished_workload_cannot_be_extended(
    sim: world.BackgroundWorld, slack: BackgroundSlack, quiet_bot: runtime.Bot
) -> None:
    slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} --name quick -- true")
    advance_until(sim, slack, headline_is(slack, "Finished"))
    before = annotations(sim)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "extend quick")
    told = ephemeral_saying(slack, "U_ALICE", "has finished")
    assert told.startswith("`quick` has finished, so there is no lease to extend.") and "Try: `" in told
    assert annotations(sim) == before


def test_a_terminating_workload_cannot_be_extended(
    sim: world.BackgroundWorld, slack: BackgroundSlack, quiet_bot: runtime.Bot
) -> None:
    run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))  # on a node, a pod terminates gracefully
    name = name_of(sim)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release")
    slack.wait_until(
        lambda: [
            e
            for e in slack.ephemerals("U_ALICE")
            if e["text"] == f"Released `{name}`. Its pod is stopping; the thread says when the GPU is back."
        ]
    )
    assert gpubot_pods(sim)[0]["metadata"].get("deletionTimestamp")  # still there, terminating
    before = annotations(sim)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", f"extend {name} 1")
    told = ephemeral_saying(slack, "U_ALICE", "is being released")
    assert told.startswith(f"`{name}` is being released, so there is no lease to extend.")
    assert annotations(sim) == before and [r["action"] for r in audit(sim)] == ["run", "release"]


def test_keep_holds_off_the_idle_release_for_one_window(
    sim: world.BackgroundWorld, slack: BackgroundSlack, quiet_bot: runtime.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    name = name_of(sim)
    warned = podspec.format_time(lease_end(sim) - timedelta(hours=3))
    quiet_bot.cluster.annotate_pod("default", name, {labels.IDLE_WARNED_AT_ANNOTATION: warned})
    slack_chat.OutboxChat(quiet_bot.outbox).reply(
        "C_GPU",
        root["ts"],
        notices.Reminder(
            "Your GPU has been idle for 45m.",
            f"default/{name}",
            notices.Buttons(release=True, extend=True, keep=True),
        ),
    )  # as the reaper warns
    warning = slack.wait_until(
        lambda: [m for m in slack.messages("C_GPU") if actions.KEEP_ACTION in button_ids(m)], timeout=WAIT
    )[0]
    before = annotations(sim)

    assert slack.click_button("U_BOB", "C_GPU", warning["ts"], actions.KEEP_ACTION).acked
    assert "only its owner or an admin may keep it" in ephemeral_saying(slack, "U_BOB", "belongs to")
    assert annotations(sim) == before

    assert slack.click_button("U_ALICE", "C_GPU", warning["ts"], actions.KEEP_ACTION).acked
    kept = slack.wait_until(
        lambda: [r for r in replies(slack, root) if r.startswith("Kept by")], timeout=WAIT
    )
    notes = annotations(sim)
    until = podspec.parse_time(notes[labels.KEPT_UNTIL_ANNOTATION])
    assert until is not None
    assert kept == [f"Kept by its owner: no idle release before {token(until)}."]
    *_, keep = audit(sim)
    at = podspec.parse_time(keep["at"])
    assert at is not None and until - at == timedelta(minutes=45)  # the idle window
    assert (keep["action"], keep["actor"], keep["kept_until"]) == (
        "keep",
        "U_ALICE",
        podspec.format_time(until),
    )
    changed = {k for k in notes if notes.get(k) != before.get(k)}
    assert changed == {labels.KEPT_UNTIL_ANNOTATION, labels.AUDIT_ANNOTATION}  # the warning mark stays
    assert notes[labels.IDLE_WARNED_AT_ANNOTATION] == warned
