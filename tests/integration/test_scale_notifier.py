"""The scale channel end to end: the sim's autoscaler, real informers, the real outbox and the Slack emulator.

Nothing is mocked. The test drives the sim's manual clock through a whole scale episode and reads the
#gpu-ops channel back from the emulator: one top-level message, whose revisions tell the episode.
Waits are on emulator activity with timeouts, never fixed sleeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot import profiles
from bot.adapters import kube, slack_chat, slack_outbox
from bot.core import models, podspec
from bot.services import scale_notifier
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.runner import BackgroundSlack

OPS = "C_OPS"
NAMESPACE = "default"
WAIT = 15.0
"""Real seconds to wait for informers and the outbox; only reached when something is broken."""
FAST = slack_outbox.OutboxSettings(channel_messages_per_second=50.0, channel_message_burst=50)
ALICE = models.Owner(user_id="U01ALICE", user_name="alice")
BOB = models.Owner(user_id="U02BOB", user_name="bob")
T4 = profiles.load_profile_catalog(profiles.BUILTIN_PROFILES_YAML).profiles["t4"]


pytestmark = pytest.mark.usefixtures("slack_env")


@pytest.fixture
def slack() -> Iterator[BackgroundSlack]:
    with BackgroundSlack(SlackConfig()) as running:
        yield running


@pytest.fixture
def outbox(slack: BackgroundSlack) -> Iterator[slack_outbox.SlackOutbox]:
    client = slack_outbox.make_client(slack.bot_token, base_url=slack.api_url, timeout=5)
    box = slack_outbox.SlackOutbox(client, FAST)
    yield box
    box.stop(timeout=5)


class Running:
    """A notifier wired as the composition root wires it: seeded, then fed by the informers."""

    def __init__(
        self, sim: world.BackgroundWorld, outbox: slack_outbox.SlackOutbox, kubeconfig: Path
    ) -> None:
        self.cluster = kube.KubeCluster.from_kubeconfig(str(kubeconfig), namespace=NAMESPACE)
        self.notifier = scale_notifier.ScaleNotifier(
            slack_chat.OutboxChat(outbox),
            OPS,
            prices=[T4],
            clock=sim.world.clock.datetime,
            find_workload=self.cluster.get_workload,
        )
        self.resumed = self.notifier.seed(self.cluster.list_nodes())
        self.cluster.start_informers(
            on_pod=lambda change, pod: None, on_event=self.notifier.on_event, on_node=self.notifier.on_node
        )
        assert self.cluster.wait_synced(WAIT)

    def stop(self) -> None:
        self.cluster.stop()


@pytest.fixture
def kubeconfig(sim: world.BackgroundWorld, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    return path


@pytest.fixture
def running(
    sim: world.BackgroundWorld, outbox: slack_outbox.SlackOutbox, kubeconfig: Path
) -> Iterator[Running]:
    started = Running(sim, outbox, kubeconfig)
    yield started
    started.stop()


def gpu_pod(sim: world.BackgroundWorld, owner: models.Owner, thread_ts: str) -> dict[str, Any]:
    request = models.RunRequest(image="nvidia/cuda:12.4.1-base-ubuntu22.04", command=("sleep", "3600"))
    now: datetime = sim.world.clock.datetime()
    return podspec.build_pod(
        request,
        T4,
        owner,
        now=now,
        lease=timedelta(hours=2),
        channel="C_GPU",
        thread_ts=thread_ts,
        namespace=NAMESPACE,
    )


def episode_messages(slack: BackgroundSlack) -> list[dict[str, Any]]:
    return [m for m in slack.messages(OPS) if not m["thread_ts"]]


def shown(blocks: list[dict[str, Any]]) -> str:
    """What a person reads in the message: each block's text, one per line."""
    texts = [b["text"]["text"] for b in blocks if b.get("type") == "section"]
    texts += [e["text"] for b in blocks if b.get("type") == "context" for e in b["elements"]]
    return "\n".join(texts)


def wait_for_text(slack: BackgroundSlack, pattern: str, *, index: int = 0) -> str:
    """Wait until top-level message `index` of #gpu-ops reads `pattern`; return what it reads."""

    def current() -> str:
        messages = episode_messages(slack)
        text = shown(messages[index]["blocks"]) if len(messages) > index else ""
        return text if re.search(pattern, text) else ""

    try:
        return slack.wait_until(current, timeout=WAIT)
    except TimeoutError:
        raise AssertionError(f"#gpu-ops never read {pattern!r}:\n{slack.render_text()}") from None


def phase(sim: world.BackgroundWorld, name: str) -> str:
    found = [p for p in sim.pods(NAMESPACE) if p["metadata"]["name"] == name]
    return str(found[0]["status"].get("phase", "")) if found else "gone"


EXPECTED_CLOSE = "pool at 0 — episode 18m30s, 0.28 GPU-hours, ≈ $0.15"
"""Triggered at 0:30 (the 30 s GPU pod buffer), node up 2:00 to 19:00: released at 8:30, 30 s of SIGTERM
grace that `sleep` ignores, then 10 minutes unneeded; 0.283 node-hours at the t4's $0.54."""


def test_one_message_walks_through_the_whole_episode(
    sim: world.BackgroundWorld, slack: BackgroundSlack, running: Running
) -> None:
    assert running.resumed == 0 and episode_messages(slack) == []
    pod = running.cluster.create_pod(gpu_pod(sim, ALICE, "1700.1"))

    sim.advance(60)
    wait_for_text(slack, rf"scale-up triggered for alice's {pod.name} \(gpu-pool 0→1\)")
    sim.advance(150)
    wait_for_text(slack, r"Ready after 2m00s")
    sim.advance(300)
    assert phase(sim, pod.name) == "Running"

    running.cluster.delete_pod(NAMESPACE, pod.name)
    sim.advance(60)
    assert phase(sim, pod.name) == "gone"
    sim.advance(900)
    # The node watch may report the removal before the autoscaler's event dates it; the edit that follows
    # corrects the figures, so wait for those.
    final = wait_for_text(slack, re.escape(EXPECTED_CLOSE))

    [message] = episode_messages(slack)
    node = sim.world.node_ctl.nodes_of("gpu-pool") or []
    assert node == []
    assert message["text"] == "gpu-pool: back at 0 nodes"
    lines = re.findall(r"• (.*)", final)
    assert lines[0] == f"scale-up triggered for alice's {pod.name} (gpu-pool 0→1)"
    assert re.fullmatch(r"node gke-demo-gpu-pool-\S+ joined after 1m30s", lines[1])
    assert re.fullmatch(r"node gke-demo-gpu-pool-\S+ Ready after 2m00s", lines[2])
    assert re.fullmatch(r"scale-down: node gke-demo-gpu-pool-\S+ removed", lines[3])
    assert lines[4:] == [EXPECTED_CLOSE]
    assert final.count("$0.15") == 1, "the cost is told once, on the closing line"
    revisions = [shown(r["blocks"]) for r in message["revisions"]]
    heads = [r.splitlines()[0] for r in revisions]
    assert heads[0] == ":arrows_counterclockwise: *gpu-pool* · scaling up to 1: waiting for a node"
    assert heads[-1] == ":white_check_mark: *gpu-pool* · back at 0 nodes"
    assert any("Ready after 2m00s" in r and "pool at 0" not in r for r in revisions[1:-1])
    assert len(set(revisions)) == len(revisions), "an edit that changes nothing"


def test_max_size_warns_in_the_same_message(
    sim: world.BackgroundWorld, slack: BackgroundSlack, running: Running
) -> None:
    sim.run(lambda: sim.world.registry.set_autoscaling("gpu-pool", enabled=True, min_size=0, max_size=1))
    first = running.cluster.create_pod(gpu_pod(sim, ALICE, "1700.1"))
    second = running.cluster.create_pod(gpu_pod(sim, BOB, "1700.2"))

    sim.advance(60)
    text = wait_for_text(slack, r"max size reached")
    sim.advance(600)
    assert phase(sim, first.name) == "Running" and phase(sim, second.name) == "Pending"
    text = wait_for_text(slack, r"1 node Ready")

    assert len(episode_messages(slack)) == 1
    assert f"scale-up triggered for alice's {first.name} (gpu-pool 0→1)" in text
    assert f"scale-up triggered for bob's {second.name} (gpu-pool 0→1)" in text
    assert (
        f":warning: max size reached: gpu-pool is at its maximum of 1 node; bob's {second.name} waits for a "
        "GPU to free up"
    ) in text


def test_a_restart_mid_episode_opens_a_fresh_message_that_resumes(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    outbox: slack_outbox.SlackOutbox,
    running: Running,
    kubeconfig: Path,
) -> None:
    pod = running.cluster.create_pod(gpu_pod(sim, ALICE, "1700.1"))
    sim.advance(60)
    sim.advance(300)
    wait_for_text(slack, r"Ready after 2m00s")
    running.stop()

    restarted = Running(sim, outbox, kubeconfig)
    try:
        assert restarted.resumed == 1
        wait_for_text(slack, r"resumed after a gpubot restart with 1 node up", index=1)
        restarted.cluster.delete_pod(NAMESPACE, pod.name)
        sim.advance(60)
        sim.advance(900)
        final = wait_for_text(slack, r"pool at 0", index=1)
    finally:
        restarted.stop()

    assert len(episode_messages(slack)) == 2
    assert re.search(
        r"pool at 0 — episode \d+m\d\ds since the restart, 0\.\d\d GPU-hours, ≈ \$0\.\d\d", final
    )
    assert "pool at 0" not in shown(episode_messages(slack)[0]["blocks"])
