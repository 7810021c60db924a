"""`gpubot demo` plays the whole story with the real bot, and its live transcript shows each beat."""

from __future__ import annotations

import io
import json
import logging
import re
from typing import Any

import pytest

from bot.cli import demo as cli_demo
from bot.core import labels
from sim.cluster.store import DELETED, Change

pytestmark = [pytest.mark.usefixtures("slack_env"), pytest.mark.slow]


Json = dict[str, Any]


class Fates:
    """Each gpubot pod's last state as the cluster stored it, and whether it is gone: the truth each thread
    root's last words are held to, read from the sim, not from the bot."""

    def __init__(self) -> None:
        self.last: dict[str, Json] = {}
        self.gone: set[str] = set()

    def record(self, change: Change) -> None:
        labelled = change.obj["metadata"].get("labels") or {}
        if change.resource == "pods" and labelled.get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE:
            self.last[change.obj["metadata"]["name"]] = change.obj
            if change.type == DELETED:
                self.gone.add(change.obj["metadata"]["name"])


def expected_headline(pod: Json, gone: bool) -> str:
    """The words a root must end on for this fate: how the pod ended, else who deleted it, else where it
    runs."""
    phase, node = pod["status"].get("phase"), pod["spec"].get("nodeName", "")
    if phase in ("Succeeded", "Failed"):
        return phase
    if not gone:
        return f"Running on {node}" if phase == "Running" else ""
    audit = json.loads(pod["metadata"]["annotations"].get(labels.AUDIT_ANNOTATION, "[]"))
    last = audit[-1] if audit else {}
    if last.get("action") == "release":
        return (
            "Released by its owner"
            if last.get("actor") == last.get("owner", pod_owner(pod))
            else "Released by"
        )
    if last.get("action") == "reap":
        return {"expire": "Deleted: its lease ended", "idle-release": "Deleted by the idle reaper"}.get(
            last.get("reason"), "Deleted"
        )
    return "Deleted outside gpubot"


def pod_owner(pod: Json) -> str:
    return str(pod["metadata"]["labels"][labels.OWNER_LABEL])


def assert_each_root_ends_in_its_pods_fate(story: cli_demo.Story, fates: Fates) -> None:
    roots = [m for m in story.slack.messages(cli_demo.USERS_CHANNEL) if not m["thread_ts"] and m["bot_id"]]
    assert len(roots) == len(fates.last) > 0
    for root in roots:
        name = root["text"].split(":", 1)[0].split("/", 1)[1]
        pod, gone = fates.last[name], name in fates.gone
        headline = root["text"].split(": ", 1)[1]
        assert headline.startswith(expected_headline(pod, gone)), (name, headline, pod["status"])
        blocks = {b.get("block_id") for b in root["blocks"]}
        over = gone or pod["status"].get("phase") in ("Succeeded", "Failed")
        assert ("gpubot_actions" in blocks) != over, (
            name,
            "buttons on a pod that is over, or none on a live one",
        )
        facts = json.dumps([b for b in root["blocks"] if b.get("block_id") == "gpubot_facts"])
        assert ("lease ends" in facts) != over, (name, "a lease on a pod that is over, or none on a live one")
        node = pod["spec"].get("nodeName")
        assert node is None or "gke-" not in headline or node in headline, (name, headline, node)


def test_the_story_plays_through_with_the_bot(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    fates = Fates()
    with cli_demo.demo_environment(out) as story:
        story.sim.run(lambda: story.sim.world.store.subscribe(fates.record))
        cli_demo.play(story)
        assert story.bot.outbox.flush(10)
        assert_each_root_ends_in_its_pods_fate(story, fates)
    # `gpubot demo` shows warnings between the transcript's lines; a story that plays right has none
    warned = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == []
    text = out.getvalue()
    beats = [
        "alice types `/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600`",
        "*Running on gke-",
        "alice types `/gpu status`",
        "Your workloads",
        "bob types `/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 --hours 1 -- sleep 86400`",
        "*Waiting for a GPU: #1 in line, about 4h",
        "the GPU pool is at its maximum size, so no new node can be added. Fix: wait for a GPU to free up",
        "alice types `/gpu release all`",
        "Released `gpu-u-alice-",
        "*Released by its owner; its GPU is back in the pool*",
        ":zzz: The GPU of `gpu-u-bob-",
        "bob presses [Keep] on the bot's message",
        "Kept by its owner: no idle release before",
        ":hourglass_flowing_sand: The lease on `gpu-u-bob-",
        ":alarm_clock: ",
        ":wastebasket: Deleted `gpu-u-bob-",
        "alice types `/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 --name data-check -- sh -c",
        "<@U_ALICE> Failed after 0s: the command exited 1 (the program reported an error",
        "| FileNotFoundError: /data/train/part-3.parquet",
        "alice types `/gpu logs`",
        "The last 2 lines of `data-check` (Failed):",
        "*gpu-pool* · back at 0 nodes",
    ]
    positions = [text.find(beat) for beat in beats]
    assert -1 not in positions, [b for b, p in zip(beats, positions, strict=True) if p == -1]
    assert positions == sorted(positions), text
    bobs_thread = (
        r"^\[sim \+\d\d:\d\d\] #gpu-users ↳ bob's thread \(new\) gpubot:\n +\| :warning: the GPU pool"
    )
    assert re.search(bobs_thread, text, re.MULTILINE), text
