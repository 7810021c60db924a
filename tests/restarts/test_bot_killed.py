"""`gpubot serve` SIGKILLed at each point of a workload's life, then started again in its place.

After every restart: the thread resumes (its root is edited on to the final state), there is one pod per
request, and no reminder is lost or sent twice. Points the bot cannot be caught at by timing alone are
made to last: Slack refusing chat.postMessage holds the bot inside a post, and the kill lands there.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from bot.core import labels, podspec
from sim.cluster import world
from sim.slack.ratelimits import FaultConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, RUN, advance_until, step_reached
from tests.restarts import ledger, processes
from tests.restarts.conftest import BotFactory

RUN_ONE_HOUR = f"run {CUDA} --hours 1 -- python train.py"
"""A busy GPU, so only the lease decides; the reminder is due 45 minutes in, the nudge at 57."""
REAPER = {"GPUBOT_REAPER_INTERVAL_SECONDS": "1"}
SLACK_DOWN = FaultConfig(rate=1.0, statuses=(503,), methods=frozenset({"chat.postMessage"}))


def failed_posts(slack: BackgroundSlack) -> int:
    return len([c for c in slack.calls("chat.postMessage") if c.status == 503])


def terminating(sim: world.BackgroundWorld) -> bool:
    return all(p["metadata"].get("deletionTimestamp") for p in sim.pods())


def ephemerals(slack: BackgroundSlack, words: str) -> list[ledger.Json]:
    return [e for e in slack.ephemerals("U_ALICE") if words in e["text"]]


def the_root(slack: BackgroundSlack) -> ledger.Json:
    (root,) = ledger.roots(slack)
    return root


def finish(sim: world.BackgroundWorld, slack: BackgroundSlack, pods: ledger.PodLedger) -> ledger.Json:
    """Release the one workload and follow its thread to the end: the root closed, the pod gone."""
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", "release")
    assert delivery.acked
    advance_until(sim, slack, lambda: ledger.is_closed(the_root(slack)) and not pods.live)
    root = the_root(slack)
    assert root["text"].startswith("default/") and "Released" in root["text"]
    return root


def assert_one_workload(pods: ledger.PodLedger, slack: BackgroundSlack) -> None:
    assert len(pods.created) == 1, pods.created
    assert not pods.threads_with_two_pods()
    assert len(ledger.roots(slack)) == 1
    assert not ledger.open_threads(slack)


def test_killed_after_the_ack_before_the_pod_exists(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.set_faults(SLACK_DOWN)
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    assert delivery.acked and "Requesting 1 GPU" in str(delivery.ack_payload)
    processes.wait(lambda: failed_posts(slack), what="the thread root's post refused")
    bot.kill()
    assert not pods.created and not ledger.roots(slack)

    slack.set_faults(FaultConfig())
    bot.start()
    processes.wait(lambda: pods.created and ledger.roots(slack), what="the request carried out")
    advance_until(sim, slack, step_reached(slack, "Running"))
    finish(sim, slack, pods)
    assert_one_workload(pods, slack)


def test_killed_right_after_the_pod_is_created(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    processes.wait(lambda: pods.created, what="the pod")
    bot.kill()

    bot.start()
    advance_until(sim, slack, step_reached(slack, "Running"))
    assert "Running on" in the_root(slack)["text"]
    finish(sim, slack, pods)
    assert_one_workload(pods, slack)


def test_killed_during_provisioning_resumes_where_the_cluster_is(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "to come up"))
    bot.kill()
    sim.advance(600)  # the node comes up and the pod starts while no bot watches

    bot.start()
    processes.wait(lambda: "Running on" in the_root(slack)["text"], what="the root redrawn as Running")
    finish(sim, slack, pods)
    assert_one_workload(pods, slack)


def lease_end(sim: world.BackgroundWorld) -> datetime:
    (pod,) = sim.pods()
    end = podspec.parse_time(pod["metadata"]["annotations"][labels.LEASE_END_ANNOTATION])
    assert end is not None
    return end


def advance_to(sim: world.BackgroundWorld, moment: datetime) -> None:
    """Move the sim clock (and so the bots', which read it) to `moment`."""
    sim.advance(max((moment - sim.world.clock.datetime()).total_seconds(), 0))


def running_with_a_lease(sim: world.BackgroundWorld, slack: BackgroundSlack) -> tuple[ledger.Json, datetime]:
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN_ONE_HOUR)
    advance_until(sim, slack, step_reached(slack, "Running"))
    return the_root(slack), lease_end(sim)


def assert_reminded_once(
    sim: world.BackgroundWorld, slack: BackgroundSlack, root: ledger.Json, end: datetime
) -> None:
    """The reminder once in the thread and by DM; still once after the next act, the nudge, is done too.

    Each act is awaited at a moment it is due, so the bot's reaper rounds (real seconds apart) see it."""
    processes.wait(lambda: ledger.replies(slack, root, "lease on"), what="the reminder")
    advance_to(sim, end - timedelta(minutes=2))
    processes.wait(lambda: ledger.replies(slack, root, "left on"), what="the nudge")
    assert len(ledger.replies(slack, root, "lease on")) == 1
    assert len(ledger.dms(slack, "U_ALICE", "lease on")) == 1
    assert len(ledger.replies(slack, root, "left on")) == 1


def test_a_reminder_due_while_the_bot_was_down_is_sent_once_after_restart(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    bot = bots(**REAPER)
    bot.start()
    root, end = running_with_a_lease(sim, slack)
    bot.kill()
    advance_to(sim, end - timedelta(minutes=14))  # past the reminder's time, with no bot running
    bot.start()
    assert_reminded_once(sim, slack, root, end)
    bot.kill()  # a restart after the reminder does not send it again
    bot.start()
    advance_to(sim, end + timedelta(minutes=6))  # past the grace after the lease's end
    processes.wait(lambda: ledger.replies(slack, root, "Deleted"), what="the expiry")
    assert len(ledger.replies(slack, root, "lease on")) == len(ledger.replies(slack, root, "left on")) == 1


def test_a_reminder_claimed_but_not_delivered_is_sent_after_restart(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    bot = bots(**REAPER)
    bot.start()
    root, end = running_with_a_lease(sim, slack)
    slack.set_faults(SLACK_DOWN)
    before = failed_posts(slack)
    advance_to(sim, end - timedelta(minutes=14))
    processes.wait(lambda: failed_posts(slack) > before, what="the reminder's post refused")
    bot.kill()
    slack.set_faults(FaultConfig())
    bot.start()
    advance_to(sim, end - timedelta(minutes=8))  # the dead replica's claim is void by now
    assert_reminded_once(sim, slack, root, end)


def test_an_expiry_whose_message_was_not_delivered_is_told_and_done_once(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots(**REAPER)
    bot.start()
    root, end = running_with_a_lease(sim, slack)
    advance_to(sim, end - timedelta(minutes=2))
    processes.wait(lambda: ledger.replies(slack, root, "left on"), what="the nudge")
    slack.set_faults(SLACK_DOWN)
    before = failed_posts(slack)
    advance_to(sim, end + timedelta(minutes=6))
    processes.wait(lambda: failed_posts(slack) > before, what="the expiry's post refused")
    bot.kill()
    slack.set_faults(FaultConfig())
    bot.start()
    advance_to(sim, end + timedelta(minutes=12))  # the dead replica's claim is void by now
    processes.wait(lambda: ledger.replies(slack, root, "Deleted"), what="the expiry told")
    processes.wait(lambda: terminating(sim), what="the expiry done")
    advance_until(sim, slack, lambda: ledger.is_closed(the_root(slack)) and not pods.live)
    assert len(ledger.replies(slack, root, "Deleted")) == 1
    assert_one_workload(pods, slack)


def test_killed_during_a_release_the_thread_still_closes(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))
    slack.set_faults(SLACK_DOWN)
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release")
    processes.wait(lambda: terminating(sim), what="the pod terminating")
    bot.kill()
    slack.set_faults(FaultConfig())

    bot.start()
    advance_until(sim, slack, lambda: ledger.is_closed(the_root(slack)) and not pods.live)
    assert "Released" in the_root(slack)["text"]
    assert_one_workload(pods, slack)


def test_a_release_cut_short_before_the_delete_is_finished_on_restart(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    """The release writes its audit record first, then deletes: a kill between the two leaves this."""
    pods = ledger.pod_ledger(sim)
    bot = bots(**REAPER)
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))
    bot.kill()
    (pod,) = sim.pods()
    notes = pod["metadata"]["annotations"]
    entry = podspec.release_audit_entry("U_ALICE", owner_id="U_ALICE", now=sim.world.clock.datetime())
    audit = podspec.append_audit(notes.get(labels.AUDIT_ANNOTATION), entry)
    name = pod["metadata"]["name"]

    def recorded(stored: ledger.Json) -> None:
        stored["metadata"]["annotations"][labels.AUDIT_ANNOTATION] = audit

    sim.run(lambda: sim.world.store.mutate("pods", "default", name, recorded))

    bot.start()
    processes.wait(lambda: terminating(sim), what="the release finished: the pod deleted")
    advance_until(sim, slack, lambda: ledger.is_closed(the_root(slack)) and not pods.live)
    assert_one_workload(pods, slack)


@pytest.mark.parametrize("action", ["gpubot_release", "gpubot_extend"])
def test_a_redelivered_command_and_a_double_click_act_once(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory, action: str
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots()
    bot.start()
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    processes.wait(lambda: pods.created and ledger.roots(slack), what="the pod")
    again = slack.redeliver(delivery)  # the same request in a new envelope, as after a lost ack
    assert again.acked
    advance_until(sim, slack, step_reached(slack, "Running"))
    root = the_root(slack)
    for _ in range(2):
        assert slack.click_button("U_ALICE", "C_GPU", root["ts"], action).acked
    if action == "gpubot_release":
        processes.wait(lambda: terminating(sim), what="the release")
        name = sim.pods()[0]["metadata"]["name"]
        slack.type_command("U_ALICE", "C_GPU", "/gpu", f"release {name}")  # and once more, by hand
        processes.wait(lambda: ephemerals(slack, "being released already"), what="the answer")
        advance_until(sim, slack, lambda: ledger.is_closed(the_root(slack)) and not pods.live)
        assert "Released by its owner" in the_root(slack)["text"] and not ledger.replies(
            slack, root, "Released"
        )
    else:
        processes.wait(lambda: ledger.replies(slack, root, "Extended by"), what="the extension")
        bot.kill()  # anything still queued goes with it; what the cluster holds is the truth
        (pod,) = sim.pods()
        notes = pod["metadata"]["annotations"]
        assert notes[labels.LEASE_HOURS_ANNOTATION] == "8", notes  # 4 h asked, extended once by 4 h
    assert len(pods.created) == 1 and len(ledger.roots(slack)) == 1


def test_a_restart_mid_episode_keeps_editing_the_channel_message(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bots: BotFactory
) -> None:
    pods = ledger.pod_ledger(sim)
    bot = bots(GPUBOT_SCALE_CHANNEL="C_OPS")
    bot.start()
    slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    advance_until(sim, slack, step_reached(slack, "Running"))
    processes.wait(lambda: ledger.roots(slack, "C_OPS"), what="the episode's message")
    bot.kill()
    bot.start()
    finish(sim, slack, pods)
    gpu_nodes = lambda: [n for n in sim.nodes() if "gpu-pool" in n["metadata"]["name"]]  # noqa: E731
    advance_until(sim, slack, lambda: not gpu_nodes(), stride=60, limit=3600)
    processes.wait(
        lambda: any("back at 0" in m["text"] for m in ledger.roots(slack, "C_OPS")), what="the episode closed"
    )
    (episode,) = ledger.roots(slack, "C_OPS")
    assert "resumed after a gpubot restart" in str(episode["blocks"]), episode
