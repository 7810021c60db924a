"""The bot end to end: Socket Mode envelopes from the Slack emulator, real Bolt, the real client on the sim.

The sim runs a manual clock, so a scale-up from zero takes milliseconds; tests wait on the emulator's
activity (or the sim's state checked on it), never on fixed sleeps.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from kubernetes import client

from bot import app
from bot.adapters import slack_render
from bot.core import labels
from handlers import actions
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    RUN,
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
    the_root,
    timeline,
)

pytestmark = pytest.mark.usefixtures("slack_env")


def test_run_walks_the_thread_through_every_step(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    (pod,) = gpubot_pods(sim)
    metadata, spec = pod["metadata"], pod["spec"]
    assert metadata["labels"][labels.OWNER_LABEL] == "U_ALICE"
    assert metadata["labels"][labels.PROFILE_LABEL] == "t4"
    notes = metadata["annotations"]
    assert (notes[labels.CHANNEL_ANNOTATION], notes[labels.THREAD_TS_ANNOTATION]) == ("C_GPU", root["ts"])
    assert notes[labels.COMMAND_ANNOTATION] == f"/gpu {RUN}"
    assert '"action":"run"' in notes[labels.AUDIT_ANNOTATION]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert spec["nodeSelector"] == {"app-type": "gpu-workloads"}
    container = spec["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["command"] == ["sleep", "3600"]

    for step in ("scaling up", "to come up with its GPU", "scheduled", "Running on"):
        advance_until(sim, slack, step_reached(slack, step))

    root = the_root(slack)
    heads = [r["text"] for r in root["revisions"]]
    order = ["asked for", "Waiting for a GPU node", "scaling up 0→1", "to come up with its GPU", "Running on"]
    positions = [next(i for i, h in enumerate(heads) if word in h) for word in order]
    assert positions == sorted(positions), heads
    node = gpubot_pods(sim)[0]["spec"]["nodeName"]
    assert f"Running on {node}" in root["text"]
    facts = timeline(root)
    assert [f.split(" +")[0] for f in facts[1:]] == ["scale-up 0→1", "node Ready", "scheduled", "Running"], (
        facts
    )
    assert facts[0].startswith("requested <!date^"), facts
    said = slack.wait_until(lambda: replies(slack, root), timeout=WAIT)
    assert len(said) == 1 and said[0].startswith(f"<@U_ALICE> Running on {node}, "), said
    assert said[0].endswith(" after the request."), said
    assert len(gpubot_pods(sim)) == 1


def test_status_release_and_the_owner_check(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    name = gpubot_pods(sim)[0]["metadata"]["name"]
    advance_until(sim, slack, headline_is(slack, "scaling up"))

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    report = slack.wait_until(
        lambda: [e for e in slack.ephemerals("U_ALICE") if "Your workloads" in e["text"]]
    )
    text = report[0]["text"]
    assert f"`{name}` — Pending, no node yet" in text and "1 GPU (t4)" in text and "lease 3h5" in text
    assert "gpu-pool: 0 node(s) ready, 0 provisioning" in text and "size 0 to 5" in text
    assert "GPUs pending (waiting for a node): 1" in text

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"release {name}")
    slack.wait_until(
        lambda: [e for e in slack.ephemerals("U_BOB") if "only its owner or an admin" in e["text"]]
    )
    assert len(gpubot_pods(sim)) == 1

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    slack.wait_until(
        lambda: [
            e
            for e in slack.ephemerals("U_ALICE")
            if e["text"] == f"Released `{name}`. Its pod is stopping; the thread says when the GPU is back."
        ]
    )
    advance_until(sim, slack, lambda: not gpubot_pods(sim) and headline_is(slack, "Released by its owner")())
    assert "Released by its owner; its GPU is back in the pool" in the_root(slack)["text"]
    assert replies(slack, root) == []  # the owner's own release notifies nobody
    assert not any(b.get("block_id") == "gpubot_actions" for b in the_root(slack)["blocks"])


def test_release_button_by_the_owner(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    run_and_wait_for_thread(sim, slack)
    root = slack.wait_until(lambda: [r for r in roots(slack) if r["edited"]])[0]
    delivery = slack.click_button("U_ALICE", "C_GPU", root["ts"], actions.RELEASE_ACTION)
    assert delivery.acked
    advance_until(sim, slack, lambda: not gpubot_pods(sim))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("run", "`/gpu run` needs an image to run.\nTry: `/gpu run nvidia/cuda"),
        ("run UPPER/Case", "Try: `/gpu run upper/case"),
        ("frobnicate", "is not a `/gpu` command"),
        ("run nvidia/cuda:12.4.1-base-ubuntu22.04 --gpus 2", "at most 1 GPU"),
    ],
)
def test_bad_input_says_what_to_type_and_creates_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot, text: str, says: str
) -> None:
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
    assert delivery.acked
    shown = delivery.ack_payload["text"] if delivery.ack_payload else ""
    if (
        "--gpus" in text
    ):  # profile limits need the service, so the refusal comes as an ephemeral after the ack
        shown = slack.wait_until(
            lambda: [e["text"] for e in slack.ephemerals("U_ALICE") if "Try:" in e["text"]]
        )[0]
    assert says in shown and "Try: `" in shown
    assert not gpubot_pods(sim) and not roots(slack)


def test_help_explains_each_command(slack: BackgroundSlack, bot: app.Bot) -> None:
    delivery = slack.type_command("U_BOB", "C_GPU", "/gpu", "help")
    assert delivery.ack_payload is not None
    for usage in ("/gpu run IMAGE", "/gpu status [all]", "/gpu release [NAME|all]"):
        assert usage in delivery.ack_payload["text"]


def test_restart_mid_provisioning_resumes_the_thread(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    config = bot_settings(sim, slack, tmp_path, redis_url)
    with running_bot(config, slack):
        root = run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, headline_is(slack, "to come up with its GPU"))
    assert replies(slack, root) == []  # the node's steps edit the root; only Running notifies
    sim.advance(40, step=1)  # the node turns Ready while no bot is watching
    with running_bot(config, slack):
        advance_until(sim, slack, headline_is(slack, "Running on"))
        said = slack.wait_until(lambda: replies(slack, root), timeout=WAIT)
    assert len(gpubot_pods(sim)) == 1 and len(roots(slack)) == 1
    assert len(said) == 1 and said[0].startswith("<@U_ALICE> Running on "), said


def test_the_button_ids_match_the_renderer() -> None:
    assert actions.RELEASE_ACTION == slack_render.RELEASE_ACTION
    assert actions.EXTEND_ACTION == slack_render.EXTEND_ACTION
    assert actions.KEEP_ACTION == slack_render.KEEP_ACTION
    assert actions.LOGS_ACTION == slack_render.LOGS_ACTION
    assert actions.ASK_ACTION == slack_render.ASK_ACTION
    assert actions.KEEP_ASKED_ACTION == slack_render.KEEP_ASKED_ACTION


def test_the_scale_channel_gets_one_message_per_episode(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    base = bot_settings(sim, slack, tmp_path, redis_url)
    config = dataclasses.replace(base, slack=dataclasses.replace(base.slack, scale_channel="C_OPS"))
    with running_bot(config, slack, clock=sim.world.clock.datetime):  # episodes date from the bot's start
        run_and_wait_for_thread(sim, slack)
        advance_until(sim, slack, step_reached(slack, "Running"))
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
        advance_until(
            sim,
            slack,
            lambda: any("back at 0" in m["text"] for m in roots(slack, "C_OPS")),
            limit=1800,
            stride=30,
        )
    (episode,) = roots(slack, "C_OPS")
    texts = [r["text"] for r in episode["revisions"]] + [episode["text"]]
    assert any("scaling up" in t for t in texts), texts
    assert "back at 0" in texts[-1]


def test_a_problem_clears_once_the_workload_moves_on(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    """Bob waits at a full pool; once alice releases and bob is scheduled, his thread drops the warning."""
    sim.run(lambda: sim.world.registry.set_autoscaling("gpu-pool", enabled=True, min_size=0, max_size=1))
    run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))
    slack.type_command("U_BOB", "C_GPU", "/gpu", RUN)

    def bobs_root() -> Json | None:
        return next((m for m in roots(slack) if "<@U_BOB>" in json.dumps(m["blocks"])), None)

    def has_problem(message: Json | None) -> bool:
        return message is not None and any(b.get("block_id") == "gpubot_problem" for b in message["blocks"])

    advance_until(sim, slack, lambda: has_problem(bobs_root()))
    slack.type_command("U_ALICE", "C_GPU", "/gpu", "release all")
    advance_until(
        sim,
        slack,
        lambda: (
            ((root := bobs_root()) is not None and "Scheduled on" in root["text"])
            or "Running" in (root or {}).get("text", "")
        ),
        limit=1800,
    )
    assert not has_problem(bobs_root())


def status_shown(slack: BackgroundSlack, user: str, words: str) -> str:
    """Ask for `/gpu status` and return the report once it says `words`."""
    slack.type_command(user, "C_GPU", "/gpu", "status")
    return str(
        slack.wait_until(lambda: [e["text"] for e in slack.ephemerals(user) if words in e["text"]])[-1]
    )


def test_status_shows_what_each_pool_costs_now(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    idle = status_shown(slack, "U_ALICE", "*GPU pools*")
    assert "gpu-pool: 0 node(s) ready, 0 provisioning" in idle and "size 0 to 5 · $0/h now" in idle
    run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))
    busy = status_shown(slack, "U_ALICE", "1 node(s) ready")
    assert (
        "• gpu-pool: 1 node(s) ready, 0 provisioning · GPUs 0 free, 1 used · size 0 to 5 · ≈ $0.54/h now"
        in busy
    )


def test_a_release_is_recorded_on_the_terminating_pod(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot, core: client.CoreV1Api
) -> None:
    root = run_and_wait_for_thread(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running"))
    name = gpubot_pods(sim)[0]["metadata"]["name"]

    slack.type_command("U_ADMIN", "C_GPU", "/gpu", f"release {name}")
    slack.wait_until(
        lambda: "<@U_ALICE> Released by admin U_ADMIN; deleting the pod." in replies(slack, root),
        timeout=WAIT,
    )
    pod = core.read_namespaced_pod(name, "default")  # still there: terminating within its grace period
    assert pod.metadata.deletion_timestamp is not None
    run, release = json.loads(pod.metadata.annotations[labels.AUDIT_ANNOTATION])
    assert (run["action"], run["actor"], run["image"]) == ("run", "U_ALICE", CUDA)
    assert {k: release[k] for k in ("action", "actor", "by")} == {
        "action": "release",
        "actor": "U_ADMIN",
        "by": "admin",
    }
    assert release["at"] >= run["at"]
    advance_until(sim, slack, lambda: not gpubot_pods(sim))
