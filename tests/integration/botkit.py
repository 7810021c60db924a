"""What every end-to-end bot test shares: the emulator and bot fixtures' parts, and transcript readers.

The sim runs a manual clock, so a scale-up from zero takes milliseconds; helpers wait on the emulator's
activity (or the sim's state checked on it), never on fixed sleeps.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler

from bot import app, settings
from bot.core import labels
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig
from sim.slack.transcript import DEFAULT_USERS, User

CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
RUN = f"run {CUDA} -- sleep 3600"
WAIT = 10.0
"""Real seconds to wait for the bot; only reached when something is broken."""
Json = dict[str, Any]


def emulator_config(users: tuple[User, ...] = DEFAULT_USERS) -> SlackConfig:
    """The emulator as the bot tests use it: Slack's 3 s ack deadline kept, its rate limits off."""
    return SlackConfig(
        users=users, rate_limits=RateLimitConfig(enabled=False), socket_mode=SocketModeConfig(ack_timeout=3.0)
    )


def bot_settings(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> settings.Settings:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    return settings.Settings(
        slack=settings.SlackSettings(
            bot_token=slack.bot_token, app_token=slack.app_token, api_base_url=slack.api_url
        ),
        # The suites written before workloads had a namespace of their own run in the sim's unlabelled
        # `default`; tests/integration/test_pod_security.py runs the product default, `gpubot-workloads`.
        cluster=settings.ClusterSettings(kubeconfig=str(kubeconfig), namespace="default"),
        quota=settings.QuotaSettings(admins=frozenset({"U_ADMIN"})),
        redis=settings.RedisSettings(url=redis_url),
    )


@contextlib.contextmanager
def running_bot(config: settings.Settings, slack: BackgroundSlack, **build: Any) -> Iterator[app.Bot]:
    """The real bot, in-process: informers synced, threads resumed, one Socket Mode connection."""
    bot = app.build(config, **build)
    bot.start(sync_timeout=WAIT)
    handler = SocketModeHandler(bot.app, config.slack.app_token)
    before = slack.connections()
    app.connect(handler)
    slack.wait_until(lambda: slack.connections() > before, timeout=WAIT)
    try:
        yield bot
    finally:
        app.hang_up(handler)
        bot.stop()


# -- reading the transcript -------------------------------------------------------------------------


def roots(slack: BackgroundSlack, channel: str = "C_GPU") -> list[Json]:
    return [m for m in slack.messages(channel) if not m["thread_ts"] and m["bot_id"]]


def replies(slack: BackgroundSlack, root: Json) -> list[str]:
    return [m["text"] for m in slack.messages(root["channel"]) if m["thread_ts"] == root["ts"]]


def the_root(slack: BackgroundSlack) -> Json:
    (root,) = roots(slack)
    return root


def timeline(message: Json) -> list[str]:
    """The root's timeline: what has happened to the pod, each with how long after the request."""
    block = next((b for b in message["blocks"] if b.get("block_id") == "gpubot_timeline"), None)
    return block["elements"][0]["text"].split(" · ") if block else []


def gpubot_pods(sim: world.BackgroundWorld, namespace: str = "default") -> list[Json]:
    return [
        p
        for p in sim.pods(namespace)
        if p["metadata"]["labels"].get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
    ]


def wait_for_pods(
    sim: world.BackgroundWorld, slack: BackgroundSlack, count: int = 1, *, namespace: str = "default"
) -> list[Json]:
    """The bot's pods once `count` exist and their thread roots are posted. The root goes out before the
    pod is created and no Slack call marks the creation, so the sim is checked every few milliseconds."""
    slack.wait_until(lambda: len(roots(slack)) >= count, timeout=WAIT)
    deadline = time.monotonic() + WAIT
    while len(pods := gpubot_pods(sim, namespace)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pods)} of {count} pods created within {WAIT} s")
        time.sleep(0.01)
    return pods


def advance_until(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    done: Callable[[], Any],
    *,
    limit: float = 900,
    stride: float = 5,
) -> Any:
    """Move the sim clock `stride` s at a time until `done()` holds, letting the bot catch up after each.

    A long stride suits waits for slow, lasting states (a scale-down after ten idle minutes)."""
    moved, changed = 0.0, True
    while moved <= limit:
        if changed:
            with contextlib.suppress(TimeoutError):
                return slack.wait_until(done, timeout=0.3)
        elif result := done():
            return result
        changed = advance_watched(sim, stride)
        moved += stride
    with contextlib.suppress(TimeoutError):  # the bot may lag behind a quick run of quiet steps
        return slack.wait_until(done, timeout=WAIT)
    shown = [m["text"] for m in slack.messages("C_GPU")]
    raise AssertionError(f"not reached within {limit} simulated seconds; channel shows {shown}")


def advance_watched(sim: world.BackgroundWorld, seconds: float, namespace: str = "default") -> bool:
    """Advance the sim clock; True if that changed pods, events or nodes the bot watches, so it has news."""

    def advance() -> bool:
        store = sim.world.store
        before = store.resource_version
        sim.world.advance(seconds, step=1)
        if before < store.oldest_resumable():  # history compacted on the way (a 410 fault): assume news
            return store.resource_version > before
        return any(
            change.resource == "nodes"
            or (change.resource in ("pods", "events") and change.obj["metadata"]["namespace"] == namespace)
            for change in store.changes_after(before)
        )

    return sim.run(advance)


def headline_is(slack: BackgroundSlack, words: str) -> Callable[[], bool]:
    return lambda: any(words in m["text"] for m in roots(slack))


def step_reached(slack: BackgroundSlack, words: str) -> Callable[[], bool]:
    """The root's headline (the stage it is at) or its timeline (the stages passed) has these words."""
    return lambda: any(words in m["text"] or any(words in t for t in timeline(m)) for m in roots(slack))


def run_and_wait_for_thread(sim: world.BackgroundWorld, slack: BackgroundSlack) -> Json:
    delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", RUN)
    assert delivery.acked and delivery.shown == "ephemeral"
    assert delivery.ack_payload is not None and "Requesting 1 GPU" in delivery.ack_payload["text"]
    wait_for_pods(sim, slack)
    advance_until(sim, slack, headline_is(slack, "Waiting for a GPU node"))
    return the_root(slack)


# -- the story ----------------------------------------------------------------------------------------
