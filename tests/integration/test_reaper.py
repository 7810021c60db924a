"""The reaper end to end on the sim clock: reminders with buttons, expiry, idleness by the DCGM metric,
restarts and two replicas. Rounds are driven by the test (`bot.reap()`), so nothing waits for a timer."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot import runtime, settings
from bot.adapters import slack_outbox
from bot.core import labels, podspec
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    WAIT,
    Json,
    advance_until,
    bot_settings,
    gpubot_pods,
    roots,
    running_bot,
    step_reached,
)

pytestmark = pytest.mark.usefixtures("slack_env")
RUN_ONE_HOUR = f"run {CUDA} --hours 1 -- python train.py"
"""A busy GPU (the sim keeps any command but `sleep` busy), so only the lease decides."""
NEVER = 3600.0
"""A timer interval tests never reach: they run reaper rounds themselves."""
STRIDE = 30.0
"""Simulated seconds between the reaper rounds `round_after_round` runs."""
ALICE_DM = "D_ALICE"


def reaper_settings(**changes: Any) -> settings.ReaperSettings:
    return dataclasses.replace(settings.ReaperSettings(interval_seconds=NEVER), **changes)


@contextlib.contextmanager
def reaping_bot(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    tmp_path: Path,
    redis_url: str,
    *,
    identity: str = "gpubot-0",
    lead: bool = True,
    outbox: slack_outbox.OutboxSettings | None = None,
    **reaper: Any,
) -> Iterator[runtime.Bot]:
    config = bot_settings(sim, slack, tmp_path, redis_url)
    config = dataclasses.replace(
        config,
        reaper=reaper_settings(prometheus_url=sim.url, **reaper),
        leader=dataclasses.replace(config.leader, identity=identity),
    )
    with running_bot(config, slack, clock=sim.world.clock.datetime, outbox_settings=outbox) as bot:
        if lead:
            slack.wait_until(lambda: bot.leading, timeout=WAIT)
        yield bot


def reap_until(
    sim: world.BackgroundWorld,
    bots: list[runtime.Bot],
    done: Callable[[], Any],
    *,
    stride: float = 30,
    limit: float = 6 * 3600,
    split_brain: bool = False,
) -> Any:
    """Advance the sim clock `stride` at a time, one reaper round per replica after each, until `done()`.

    `split_brain`: every replica's reaper runs, leader or not, as during a leadership hand-over."""
    moved = 0.0
    while moved <= limit:
        for bot in bots:
            bot.outbox.flush(WAIT)
        if result := done():
            return result
        sim.advance(stride, step=stride)
        moved += stride
        for bot in bots:
            with contextlib.suppress(TimeoutError):  # let the informers see what the clock changed
                bot.cluster.wait_synced(WAIT)
            if split_brain and bot.idle_reaper is not None:
                bot.idle_reaper.run_once()
            else:
                bot.reap()
    raise AssertionError(f"not reached within {limit} simulated seconds")


def caught_up(sim: world.BackgroundWorld, bot: runtime.Bot) -> None:
    """Wait until the bot holds every gpubot pod as the sim stores it now: the reaper decides on the
    informers' copies and guards its writes with their resourceVersion, so a round on copies older than
    the clock's last step only meets Conflicts ("next round decides again") and proves nothing. Checked
    every few milliseconds: the informers' catching up marks no Slack event."""
    bot.cluster.wait_synced(WAIT)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        stored = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in gpubot_pods(sim)}
        held = {
            key: thread.workload.resource_version for key, thread in bot.services.tracker.threads().items()
        }
        if all(held.get(key) == pod["metadata"]["resourceVersion"] for key, pod in stored.items()):
            return
        time.sleep(0.01)
    raise AssertionError("the bot's informers did not catch up with the sim")


def going(sim: world.BackgroundWorld) -> bool:
    return all(p["metadata"].get("deletionTimestamp") for p in gpubot_pods(sim))


def round_after_round(
    sim: world.BackgroundWorld, bot: runtime.Bot, due: datetime, *, limit: int = 200, flush: bool = True
) -> int:
    """Reaper rounds every STRIDE simulated seconds until the pod is going; how many rounds ran at or
    after `due` (1: the first round that could delete it did). `flush`: let the outbox drain after each
    round (not while Slack is down: it would hold what it cannot send)."""
    late = 0
    for _ in range(limit):
        sim.advance(STRIDE, step=STRIDE)
        caught_up(sim, bot)
        bot.reap()
        if flush:
            bot.outbox.flush(WAIT)
        late += sim.world.clock.datetime() >= due
        if going(sim):
            return late
    raise AssertionError(f"the pod was not deleted within {limit} rounds")


def start_workload(sim: world.BackgroundWorld, slack: BackgroundSlack, text: str = RUN_ONE_HOUR) -> Json:
    slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
    root: Json = slack.wait_until(lambda: roots(slack) and roots(slack)[0], timeout=WAIT)
    advance_until(sim, slack, step_reached(slack, "Running"))
    return root


def said(slack: BackgroundSlack, root: Json, words: str) -> list[Json]:
    return [m for m in slack.messages(root["channel"]) if m["thread_ts"] == root["ts"] and words in m["text"]]


def buttons(message: Json) -> list[str]:
    return [e["action_id"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def pod_notes(sim: world.BackgroundWorld) -> dict[str, str]:
    (pod,) = gpubot_pods(sim)
    notes: dict[str, str] = pod["metadata"]["annotations"]
    return notes


def gpu_nodes(sim: world.BackgroundWorld) -> list[Json]:
    return [
        n for n in sim.nodes() if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == "gpu-pool"
    ]


def test_reminder_nudge_then_expiry_deletes_and_the_pool_drains(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url) as bot:
        root = start_workload(sim, slack)
        reminded = reap_until(sim, [bot], lambda: said(slack, root, "The lease on"))
        dm = slack.wait_until(
            lambda: [m for m in slack.messages(ALICE_DM) if "The lease on" in m["text"]], timeout=WAIT
        )
        reap_until(sim, [bot], lambda: said(slack, root, "left on"))
        reap_until(sim, [bot], lambda: not gpubot_pods(sim) and said(slack, root, "Deleted"))
        drained = reap_until(sim, [bot], lambda: gpu_nodes(sim) == [], stride=60)
    (reminder,) = reminded
    assert buttons(reminder) == ["gpubot_extend", "gpubot_release"]
    assert "It will be deleted <!date^" in reminder["text"] and "unless you extend it" in reminder["text"]
    assert "its thread is in <#C_GPU>" in json.dumps(dm[0]["blocks"])
    assert buttons(dm[0]) == ["gpubot_extend", "gpubot_release"]
    (deleted,) = said(slack, root, "Deleted")
    assert "nobody extended it. To run it again: `/gpu run" in deleted["text"]
    assert len(said(slack, root, "The lease on")) == 1 and len(said(slack, root, "left on")) == 1
    assert drained and not said(slack, root, "drained")  # the scale channel's news, not the owner's


def test_an_idle_gpu_gets_an_early_warning_and_the_release_button_works(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url, idle_window_minutes=10.0) as bot:
        root = start_workload(sim, slack, f"run {CUDA} --hours 8 -- sleep 86400")
        (warning,) = reap_until(sim, [bot], lambda: said(slack, root, "idle for"))
        assert buttons(warning) == ["gpubot_keep", "gpubot_release"]
        assert labels.IDLE_WARNED_AT_ANNOTATION in pod_notes(sim)
        slack.click_button("U_ALICE", "C_GPU", warning["ts"], "gpubot_release")
        slack.wait_until(
            lambda: all(p["metadata"].get("deletionTimestamp") for p in gpubot_pods(sim)), timeout=WAIT
        )
    assert "It will be released <!date^" in warning["text"] and "(under 5% use)" in warning["text"]


def quiet_hour(sim: world.BackgroundWorld, bot: runtime.Bot) -> list[list[Any]]:
    """An hour of reaper rounds, one a minute; what each round did."""
    rounds = []
    for _ in range(60):
        sim.advance(60, step=60)
        bot.cluster.wait_synced(WAIT)
        rounds.append(bot.reap())
    return rounds


@pytest.mark.parametrize("case", ["busy", "metric missing", "metric stale"])
def test_a_busy_gpu_or_a_missing_metric_is_never_reaped(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str, case: str
) -> None:
    command = "python train.py" if case == "busy" else "sleep 86400"
    with reaping_bot(
        sim, slack, tmp_path, redis_url, idle_window_minutes=10.0, idle_grace_minutes=5.0
    ) as bot:
        root = start_workload(sim, slack, f"run {CUDA} --hours 8 -- {command}")
        (pod,) = gpubot_pods(sim)
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if case != "busy":
            fault = "metrics_missing" if case == "metric missing" else "metrics_stale"
            sim.run(lambda: sim.world.metrics.set_fault(key, fault))
        rounds = quiet_hour(sim, bot)
    assert rounds == [[]] * 60
    assert gpubot_pods(sim) and not said(slack, root, "idle for")


def test_a_restart_mid_countdown_neither_repeats_the_reminder_nor_forgets_the_expiry(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url) as bot:
        root = start_workload(sim, slack)
        reap_until(sim, [bot], lambda: said(slack, root, "The lease on"))
    with reaping_bot(sim, slack, tmp_path, redis_url) as bot:  # a new process: memory from the pod only
        reap_until(sim, [bot], lambda: not gpubot_pods(sim) and said(slack, root, "Deleted"))
    assert len(said(slack, root, "The lease on")) == 1
    assert len(said(slack, root, "left on")) == 1 and len(said(slack, root, "Deleted")) == 1


@pytest.mark.parametrize("split_brain", [False, True])
def test_two_replicas_remind_once_and_delete_once(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str, split_brain: bool
) -> None:
    with (
        reaping_bot(sim, slack, tmp_path, redis_url, identity="gpubot-a") as first,
        reaping_bot(sim, slack, tmp_path, redis_url, identity="gpubot-b", lead=False) as second,
    ):
        assert first.leading and not second.leading
        root = start_workload(sim, slack)
        gone = lambda: not gpubot_pods(sim) and said(slack, root, "Deleted")  # noqa: E731
        reap_until(sim, [first, second], gone, split_brain=split_brain)
        follower_rounds = [second.reap() for _ in range(3)]
    assert follower_rounds == [[]] * 3  # a follower's scheduled rounds do nothing
    assert len(said(slack, root, "The lease on")) == 1 and len(said(slack, root, "Deleted")) == 1
    dms = [m for m in slack.messages(ALICE_DM) if "The lease on" in m["text"]]
    assert len(dms) == 1


def test_dry_run_says_what_it_would_do_once_and_changes_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url, dry_run=True) as bot:
        root = start_workload(sim, slack)
        before = pod_notes(sim)
        reap_until(sim, [bot], lambda: said(slack, root, "would expire"))
        for _ in range(20):
            sim.advance(60, step=60)
            bot.cluster.wait_synced(WAIT)
            bot.reap()
        bot.outbox.flush(WAIT)
    assert len(said(slack, root, "would remind")) == 1 and len(said(slack, root, "would expire")) == 1
    assert not said(slack, root, "The lease on") and not slack.messages(ALICE_DM)
    assert pod_notes(sim) == before and not any(
        p["metadata"].get("deletionTimestamp") for p in gpubot_pods(sim)
    )


def test_reminder_extend_reminder_then_no_answer_deletes_and_the_pool_drains(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url, default_lease_hours=1.0) as bot:
        root = start_workload(sim, slack)
        first_end = pod_notes(sim)[labels.LEASE_END_ANNOTATION]
        (reminder,) = reap_until(sim, [bot], lambda: said(slack, root, "The lease on"))
        slack.click_button("U_ALICE", "C_GPU", reminder["ts"], "gpubot_extend")
        slack.wait_until(lambda: said(slack, root, "Extended by its owner"), timeout=WAIT)
        second_end = slack.wait_until(
            lambda: (end := pod_notes(sim)[labels.LEASE_END_ANNOTATION]) != first_end and end, timeout=WAIT
        )
        reminded_twice = lambda: len(found := said(slack, root, "The lease on")) == 2 and found  # noqa: E731
        _, again = reap_until(sim, [bot], reminded_twice)
        reap_until(sim, [bot], lambda: not gpubot_pods(sim) and said(slack, root, "Deleted"))
        reap_until(sim, [bot], lambda: gpu_nodes(sim) == [], stride=60)
    hour = timedelta(hours=1)
    assert podspec.parse_time(second_end) == podspec.parse_time(first_end) + hour  # type: ignore[operator]
    moment = podspec.parse_time(second_end)
    assert moment is not None and f"ends <!date^{int(moment.timestamp())}^" in again["text"]
    assert len(said(slack, root, "Deleted")) == 1 and gpu_nodes(sim) == []


def test_a_finished_pod_is_cleaned_up_after_the_retention_with_a_note(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    # under the autoscaler's 10 minutes: past them the empty node goes, and its pods with it
    with reaping_bot(sim, slack, tmp_path, redis_url, finished_retention_minutes=5.0) as bot:
        root = start_workload(sim, slack, f"run {CUDA} --hours 8 -- sleep 60")
        (finished,) = reap_until(sim, [bot], lambda: said(slack, root, "Finished"), limit=600)
        assert gpubot_pods(sim), "a finished pod stays for its logs"
        reap_until(sim, [bot], lambda: not gpubot_pods(sim) and said(slack, root, "Cleaned up"))
    (note,) = said(slack, root, "Cleaned up")
    assert note["text"].startswith(":broom: Cleaned up the finished pod `gpu-u-alice-")
    assert said(slack, root, "This run held its GPU for")
    assert float(note["ts"]) - float(finished["ts"]) > 0


BAD_IMAGE = "registry.example.com/notfound/trainer:1"
"""The sim's kubelet fails to pull any image whose reference holds `notfound`, as a registry would."""


def test_an_image_that_does_not_exist_gives_its_gpu_back_after_ten_minutes_and_the_pool_drains(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url) as bot:
        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {BAD_IMAGE} --hours 8 -- python train.py")
        root: Json = slack.wait_until(lambda: roots(slack) and roots(slack)[0], timeout=WAIT)
        advance_until(sim, slack, lambda: said(slack, root, "does not exist"))  # the pull failed, said so
        (pod,) = gpubot_pods(sim)
        started = podspec.parse_time(pod["status"]["startTime"])
        assert started is not None
        late = round_after_round(sim, bot, started + timedelta(minutes=10))  # counted on the sim clock
        drained = reap_until(sim, [bot], lambda: gpu_nodes(sim) == [], stride=60)
    assert late == 1, f"deleted {late} rounds after its 10 minutes, not in the first"
    (told,) = said(slack, root, "unable to start")
    assert told["text"].startswith(":wastebasket: Deleted `gpu-u-alice-")
    assert " after 10m" in told["text"]
    assert (
        f"the image `{BAD_IMAGE}` could not be pulled (ImagePullBackOff: Failed to pull image" in told["text"]
    )
    assert ": not found). Check the image name and tag, then `/gpu run` again." in told["text"]
    assert drained and gpubot_pods(sim) == []
