"""The composition root: Settings → adapters (cluster, outbox) → services → a Bolt App with gpubot's handlers.

The only module that knows every zone, so everything else stays swappable; `serve` runs it until SIGTERM.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.app.app import SlackAppDevelopmentServer
from slack_sdk import WebClient

import handlers
from bot import settings as settings_module
from bot.adapters import kube, slack_outbox, slack_render
from bot.core import notices
from bot.core.ports import WatchCallback
from bot.services import Services, launcher, scale_notifier, tracker

logger = logging.getLogger(__name__)

SYNC_TIMEOUT_SECONDS = 30.0
"""How long start-up waits for the informers' initial lists before resuming threads with what it has."""


class OutboxChat:
    """The services' `Chat` port over the outbox: notices rendered to Block Kit here, at the edge."""

    def __init__(self, outbox: slack_outbox.SlackOutbox) -> None:
        self.outbox = outbox

    def post(self, channel: str, notice: notices.Notice, *, thread_ts: str | None = None) -> str:
        text, blocks = slack_render.render(notice)
        return self.outbox.post(channel, text, blocks, thread_ts=thread_ts)

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.reply(channel, thread_ts, text, blocks)

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.update(channel, ts, text, blocks)

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.ephemeral(channel, user, text, blocks)


@dataclass
class Bot:
    """Everything one running gpubot holds; `start` resumes threads, `stop` drains and closes."""

    app: App
    cluster: kube.KubeCluster
    outbox: slack_outbox.SlackOutbox
    services: Services
    scales: scale_notifier.ScaleNotifier | None = None
    """Channel scale-episode messages, when a scale channel is configured."""

    def start(self, *, sync_timeout: float = SYNC_TIMEOUT_SECONDS) -> None:
        watcher = self.services.tracker
        on_event: WatchCallback = watcher.on_event
        on_node: WatchCallback = watcher.on_node
        if self.scales is not None:
            self.scales.seed(self.cluster.list_nodes())
            on_event = fan_out(watcher.on_event, self.scales.on_event)
            on_node = fan_out(watcher.on_node, self.scales.on_node)
        self.cluster.start_informers(on_pod=watcher.on_pod, on_event=on_event, on_node=on_node)
        if not self.cluster.wait_synced(sync_timeout):
            logger.warning(
                "informers not synced after %.0f s; resuming threads with what is known", sync_timeout
            )
        logger.info("resumed %s workload threads", watcher.go_live())

    def stop(self) -> None:
        self.cluster.stop()
        self.outbox.stop()


def fan_out(*callbacks: WatchCallback) -> WatchCallback:
    """One informer, several listeners: each gets every change, in order."""

    def deliver(change: str, obj: Mapping[str, Any]) -> None:
        for callback in callbacks:
            callback(change, obj)

    return deliver


def connect_cluster(settings: settings_module.Settings) -> kube.KubeCluster:
    found = settings.cluster
    return kube.connect(
        kubeconfig=found.kubeconfig,
        context=found.context,
        namespace=found.namespace,
        in_cluster=found.in_cluster,
    )


def build(
    settings: settings_module.Settings,
    *,
    cluster: kube.KubeCluster | None = None,
    clock: Callable[[], datetime] = tracker.wall_clock,
) -> Bot:
    """Wire one bot; nothing runs until `Bot.start` (informers) and a Socket Mode or HTTP handler (Slack)."""
    slack = settings.slack
    catalog = settings_module.read_profile_catalog(settings)
    cluster = cluster or connect_cluster(settings)
    outbox = slack_outbox.SlackOutbox(slack_outbox.make_client(slack.bot_token, base_url=slack.api_base_url))
    chat = OutboxChat(outbox)
    launch = launcher.LaunchSettings(
        namespace=settings.cluster.namespace,
        profiles=catalog.profiles,
        default_profile=catalog.default,
        policy=settings.policy(),
    )
    services = Services(
        launcher=launcher.Launcher(cluster, chat, launch, clock=clock),
        tracker=tracker.Tracker(chat, clock=clock),
    )
    app = App(
        client=WebClient(token=slack.bot_token, base_url=slack.api_base_url),
        signing_secret=slack.signing_secret or None,
    )
    handlers.register(app, services)
    scales = None
    if slack.scale_channel:
        scales = scale_notifier.ScaleNotifier(
            chat,
            slack.scale_channel,
            prices=catalog.profiles.values(),
            clock=clock,
            find_workload=cluster.get_workload,
        )
    return Bot(app=app, cluster=cluster, outbox=outbox, services=services, scales=scales)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def serve(settings: settings_module.Settings) -> int:
    """`gpubot serve`: Socket Mode (or HTTP mode with a signing secret) until SIGTERM or Ctrl-C."""
    logging.getLogger().setLevel(settings.log_level)
    logger.info("gpubot starting with %s", settings.redacted())
    bot = build(settings)
    bot.start()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if settings.slack.mode == "http":
            SlackAppDevelopmentServer(
                port=settings.slack.http_port, path=settings.slack.http_path, app=bot.app
            ).start()
        else:
            handler = SocketModeHandler(bot.app, settings.slack.app_token)
            handler.connect()  # type: ignore[no-untyped-call]
            threading.Event().wait()
    except KeyboardInterrupt:
        logger.info("stopping")
    finally:
        bot.stop()
    return 0
