"""`gpubot demo` plays the whole story with the real bot, and its live transcript shows each beat."""

from __future__ import annotations

import io
import logging
import re

import pytest

from bot import cli_demo

pytestmark = pytest.mark.usefixtures("slack_env")


def test_the_story_plays_through_with_the_bot(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    assert cli_demo.play_story(out) == 0
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
