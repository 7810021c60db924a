"""The composition root: Settings → adapters (cluster, outbox) → services → a Bolt App with gpubot's handlers.

The only module that knows every zone, so everything else stays swappable; `serve` runs it until SIGTERM.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import FrameType
from typing import Any
from wsgiref import simple_server

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from kubernetes.config.config_exception import ConfigException
from slack_bolt import App
from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient

import handlers
from bot import settings as settings_module
from bot.adapters import (
    http_server,
    kube,
    leader,
    metrics,
    observability,
    outbox_journal,
    slack_forms,
    slack_http,
    slack_outbox,
    slack_render,
    store,
)
from bot.adapters import reservations as quota_reservations
from bot.core import models, notices, pools, ports, runform, warm, workloads, workspaces
from bot.core.ports import WatchCallback
from bot.services import (
    Services,
    home,
    launcher,
    leases,
    reaper,
    reservations,
    scale_notifier,
    spend,
    tracker,
)
from bot.services import asks as asks_service
from bot.services import connect as connect_service
from bot.services import doctor as doctor_service
from bot.services import forms as forms_service
from bot.services import logs as logs_service
from bot.services import warm as warm_service

logger = logging.getLogger(__name__)

SYNC_TIMEOUT_SECONDS = 30.0
"""How long start-up waits for the informers' initial lists before resuming threads with what it has."""
WARM_MISFIRE_SECONDS = 600
"""A warm edge missed by up to this much (a busy or restarting replica) still fires; later ones wait for
the next edge, or the catch-up a new leader does."""
TICK_SECONDS = 15.0
"""How often timers look for what no watch reports (a node far later than usual)."""


class OutboxChat:
    """The services' `Chat` port over the outbox: notices rendered to Block Kit here, at the edge."""

    def __init__(self, outbox: slack_outbox.SlackOutbox) -> None:
        self.outbox = outbox

    def post(
        self,
        channel: str,
        notice: notices.Notice,
        *,
        thread_ts: str | None = None,
        timeout: float | None = None,
    ) -> str:
        text, blocks = slack_render.render(notice)
        return self.outbox.post(channel, text, blocks, thread_ts=thread_ts, timeout=timeout)

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.reply(channel, thread_ts, text, blocks)

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.update(channel, ts, text, blocks)

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        if channel:
            self.outbox.ephemeral(channel, user, text, blocks)
        else:
            self.outbox.dm(user, text, blocks)

    def publish_home(self, user: str, home: notices.Home) -> None:
        self.outbox.publish(user, slack_render.render_home(home))

    def dm(self, user: str, notice: notices.Notice) -> None:
        text, blocks = slack_render.render(notice)
        self.outbox.dm(user, text, blocks)

    def post_dm(self, user: str, notice: notices.Notice, *, timeout: float | None = None) -> str:
        text, blocks = slack_render.render(notice)
        return self.outbox.post_dm(user, text, blocks, timeout=timeout)

    def open_form(self, trigger_id: str, form: runform.RunForm) -> None:
        self.outbox.open_view(trigger_id, slack_forms.render_run_form(form))

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        return self.outbox.upload(
            user, filename, content, comment=slack_render.fallback(comment), timeout=timeout
        )


@dataclass
class Bot:
    """Everything one running gpubot holds; `start` resumes threads, `stop` drains and closes."""

    app: App
    cluster: kube.KubeCluster
    outbox: slack_outbox.SlackOutbox
    services: Services
    store: ports.Store
    scales: scale_notifier.ScaleNotifier | None = None
    """Channel scale-episode messages, when a scale channel is configured."""
    elector: leader.LeaderElector | None = None
    """With several replicas, only the Lease holder speaks in threads and channels and runs timers."""
    idle_reaper: reaper.Reaper | None = None
    reap_seconds: float = 60.0
    tick_seconds: float = TICK_SECONDS
    scheduler: BackgroundScheduler = field(default_factory=lambda: BackgroundScheduler(timezone="UTC"))
    telemetry: observability.Telemetry = field(default_factory=observability.Telemetry)
    """Metrics, and the /healthz, /readyz and /metrics server that `serve` starts."""
    slack_connected: Callable[[], bool] | None = None
    """Set once a Socket Mode connection or the HTTP server exists; readiness asks it."""
    url_finder: connect_service.UrlFinder | None = None
    """Follows running workloads' output for what their owners should open."""

    @property
    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def unready_reason(self) -> str | None:
        """Why this replica should get no traffic yet. Leading is not needed: a follower answers requests."""
        if not self.cluster.wait_synced(0):
            return "informers not synced"
        if self.slack_connected is None or not self.slack_connected():
            return "Slack not connected"
        return None

    def start(self, *, sync_timeout: float = SYNC_TIMEOUT_SECONDS) -> None:
        watcher = self.services.tracker
        on_event: WatchCallback = watcher.on_event
        on_node: WatchCallback = watcher.on_node
        if self.scales is not None:
            self.scales.seed(self.cluster.list_nodes())
            on_event = fan_out(watcher.on_event, self.scales.on_event)
            on_node = fan_out(watcher.on_node, self.scales.on_node)
        self.cluster.start_informers(on_pod=watcher.on_pod, on_event=on_event, on_node=on_node)
        warmer = self.services.warmer
        if warmer is not None:
            self.cluster.watch_config(warmer.configmap, warmer.on_config)
            self.sync_warm_jobs()
        if not self.cluster.wait_synced(sync_timeout):
            logger.warning(
                "informers not synced after %.0f s; resuming threads with what is known", sync_timeout
            )
        if self.elector is None:
            self.lead()
        else:
            self.elector.start()
        self.scheduler.add_job(self.resume_runs, id="resume", kwargs={"at_start": True})  # once, now
        self.scheduler.add_job(self.tick, "interval", seconds=self.tick_seconds, id="tick", coalesce=True)
        if self.idle_reaper is not None:
            self.scheduler.add_job(self.reap, "interval", seconds=self.reap_seconds, id="reap", coalesce=True)
        self.scheduler.start()

    def lead(self) -> None:
        """This replica speaks from now on: every thread and open episode is brought up to date."""
        logger.info("leading: resumed %s workload threads", self.services.tracker.go_live())
        if self.scales is not None:
            self.scales.go_live()
        self.warm_now()  # an edge passed while no replica led is caught up now

    def follow(self) -> None:
        """Another replica leads: keep watching, say nothing."""
        logger.info("not leading (stopped, or another replica holds the lease): watching quietly")
        self.services.tracker.pause()
        if self.scales is not None:
            self.scales.pause()

    def tick(self) -> None:
        if not self.leading:
            return
        try:
            self.services.tracker.tick()
            if self.scales is not None:
                self.scales.tick()
        except Exception:  # a timer must survive one bad round; the next tick tries again
            logger.exception("tick failed")
        self.resume_runs(at_start=False)

    def resume_runs(self, *, at_start: bool) -> None:
        """Runs a crash cut short between the ack and the pod: this replica's own at start, a gone
        replica's on the leader's ticks."""
        try:
            resumed = self.services.launcher.resume(at_start=at_start)
        except Exception:  # the next tick tries again
            logger.exception("resuming interrupted runs failed")
            return
        if resumed:
            logger.info("resumed %s runs cut short by a restart", resumed)

    def warm_changed(self) -> None:
        """The schedules changed (an admin's `/gpu warm`, seen by the watch): re-arm the edges, catch up."""
        self.sync_warm_jobs()
        self.warm_now()

    def sync_warm_jobs(self) -> None:
        """One cron job per schedule edge, in the schedule's own time zone; APScheduler handles DST."""
        warmer = self.services.warmer
        if warmer is None:
            return
        for job in self.scheduler.get_jobs():
            if job.id.startswith("warm-"):
                job.remove()
        for n, schedule in enumerate(warmer.schedules):
            for edge, fields in enumerate(warm.cron_fields(schedule)):
                self.scheduler.add_job(
                    self.warm_now,
                    CronTrigger(**fields),
                    id=f"warm-{n}-{edge}",
                    coalesce=True,
                    misfire_grace_time=WARM_MISFIRE_SECONDS,
                )

    def warm_now(self) -> list[warm.WarmChange]:
        """Bring the pools to what the warm schedules want now; the leader only, so it is done once."""
        warmer = self.services.warmer
        if warmer is None or not self.leading:
            return []
        try:
            return warmer.reconcile()
        except Exception:  # the next edge or change tries again
            logger.exception("warm schedules could not be applied")
            return []

    def reap(self) -> list[reaper.Done]:
        """One reaper round; only the leader reaps, so two replicas never remind or delete twice."""
        if self.idle_reaper is None or not self.leading:
            return []
        try:
            return self.idle_reaper.run_once()
        except Exception:  # the next round tries again; a reaper that dies silently keeps nodes alive
            logger.exception("reaper round failed")
            return []

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        if self.elector is not None:
            self.elector.stop()  # releases the Lease, so a successor need not wait for it to expire
        if self.url_finder is not None:
            self.url_finder.close()
        self.cluster.stop()
        self.outbox.stop()
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
        self.telemetry.stop()


def fan_out(*callbacks: WatchCallback) -> WatchCallback:
    """One informer, several listeners: each gets every change, in order."""

    def deliver(change: str, obj: Mapping[str, Any]) -> None:
        for callback in callbacks:
            callback(change, obj)

    return deliver


def known_or_read(
    known: scale_notifier.FindWorkload, read: scale_notifier.FindWorkload
) -> scale_notifier.FindWorkload:
    """The informer's copy of a workload, else one read from the API (an event may beat its pod's ADDED).

    A scale-up names every pending pod in its own event: a GET for each would queue the event informer
    behind a thousand reads exactly when the channel should hear of the scale-up."""

    def find(namespace: str, name: str) -> workloads.Workload | None:
        return known(namespace, name) or read(namespace, name)

    return find


def connect_cloud(found: settings_module.CloudSettings) -> ports.PoolManager | None:
    """The pool's cloud, when configured: resized by warm schedules, read by `/gpu doctor`."""
    if not found.provider:
        return None
    from bot.adapters import eks, gke  # the cloud SDKs load only when a cloud is configured

    if found.provider == "gke":
        where = {"project": found.project, "location": found.location, "cluster": found.cluster_name}
        return gke.GkePools.connect(found, **where)
    return eks.EksPools.connect(found, cluster=found.cluster_name)


def connect_cluster(settings: settings_module.Settings) -> kube.KubeCluster:
    """The cluster the settings name; credentials that cannot be loaded are a setting to fix."""
    found = settings.cluster
    try:
        return kube.connect(
            kubeconfig=found.kubeconfig,
            context=found.context,
            namespace=found.namespace,
            in_cluster=found.in_cluster,
        )
    except (ConfigException, OSError) as err:
        where = (
            "the pod's service account"
            if found.in_cluster
            else f"kubeconfig {found.kubeconfig or '~/.kube/config'}"
        )
        raise settings_module.SettingsError(
            f"cannot load the cluster's credentials from {where} ({err}): "
            "set KUBECONFIG to a kubeconfig file, or run in a pod with GPUBOT_IN_CLUSTER=true"
        ) from err


def build(
    settings: settings_module.Settings,
    *,
    cluster: kube.KubeCluster | None = None,
    clock: Callable[[], datetime] = tracker.wall_clock,
    tick_seconds: float = TICK_SECONDS,
    outbox_settings: slack_outbox.OutboxSettings | None = None,
) -> Bot:
    """Wire one bot; nothing runs until `Bot.start` (informers) and a Socket Mode or HTTP handler (Slack).

    `outbox_settings` lift Slack's pacing for a Slack that allows more (the soak's emulator)."""
    slack = settings.slack
    catalog = settings_module.read_profile_catalog(settings)
    cluster = cluster or connect_cluster(settings)
    kept = store.open_store(settings.redis.url, prefix=settings.redis.key_prefix)
    outbox = slack_outbox.SlackOutbox(
        slack_outbox.make_client(slack.bot_token, base_url=slack.api_base_url),
        outbox_settings,
        journal=outbox_journal.OutboxJournal(kept, replica=settings.leader.identity),
    )
    chat = OutboxChat(outbox)
    pool_manager = connect_cloud(settings.cloud)
    telemetry = observability.Telemetry()
    launch = launcher.LaunchSettings(
        namespace=settings.cluster.namespace,
        profiles=catalog.profiles,
        default_profile=catalog.default,
        policy=settings.policy(),
        reaper=settings.reaper_policy(),
        security=settings.cluster.pod_security,
    )
    ledger = reservations.Ledger(quota_reservations.open_reservations(kept, prefix=settings.redis.key_prefix))
    lease_service = leases.Leases(cluster, chat, launch, clock=clock, ledger=ledger)
    # The finder tells the tracker what it read, and the tracker asks the finder to look: the lambda
    # reaches the tracker made on the next line.
    url_finder = connect_service.UrlFinder(
        cluster.follow_log, found=lambda key, url: workload_tracker.url_found(key, url)
    )
    workload_tracker = tracker.Tracker(
        chat,
        clock=clock,
        store=kept,
        prices={name: profile.price_per_hour for name, profile in catalog.profiles.items()},
        telemetry=telemetry,
        read_log=cluster.read_log,
        policy=settings.reaper_policy(),
        find_url=url_finder.look,
    )
    run_launcher = launcher.Launcher(
        cluster,
        chat,
        launch,
        clock=clock,
        ledger=ledger,
        store=kept,
        telemetry=telemetry,
        replica=settings.leader.identity,
    )
    services = Services(
        launcher=run_launcher,
        forms=forms_service.RunForms(cluster, chat, launch, run_launcher, store=kept),
        leases=lease_service,
        logs=logs_service.Logs(cluster, chat, lease_service, fits=slack_render.code_block_fits),
        tracker=workload_tracker,
        store=kept,
        warmer=warm_service.Warmer(
            pool_manager,
            cluster,
            chat,
            cloud=pools.Cloud(settings.cloud.provider) if settings.cloud.provider else None,
            configured=settings.warm.schedules,
            configmap=settings.warm.configmap,
            channel=slack.scale_channel,
            policy=settings.policy(),
            profiles=catalog.profiles.values(),
            clock=clock,
        ),
        doctor=doctor_service.SlackDoctor(
            doctor_service.Request(
                namespace=settings.cluster.namespace,
                profiles=dict(catalog.profiles),
                cloud=settings.cloud.provider,
                cluster=settings.cloud.cluster_name,
                warm_configmap=settings.warm.configmap,
                lease_name=settings.leader.lease_name if settings.leader.enabled else "",
            ),
            probe=cluster,
            store=kept,
            cloud=pool_manager,
            chat_port=chat,
            policy=settings.policy(),
            clock=clock,
        ),
        asks=asks_service.Asks(
            cluster,
            chat,
            lease_service,
            clock=clock,
            once_per=settings.reaper_policy().idle_window,
            store=kept,
        ),
    )
    services = with_home(services, cluster, chat, kept, catalog.profiles, settings.policy().admins, clock)
    app = App(
        client=WebClient(token=slack.bot_token, base_url=slack.api_base_url),
        signing_secret=slack.signing_secret or None,
        # Acks run on the request's own thread. Otherwise Bolt runs them on the 5-thread executor its lazy
        # listeners share, and a burst of slow halves (each waiting for its thread root to be posted)
        # keeps later acks queued past Slack's 3 s. Every listener here is ack + lazy, so nothing slow
        # runs before a response.
        process_before_response=True,
    )
    handlers.register(app, services, installation=served_workspaces(slack, app.client))
    tracked = reaper.live_from(services.tracker.threads)  # gpubot's pods as the informers hold them
    scales = None
    if slack.scale_channel:
        scales = scale_notifier.ScaleNotifier(
            chat,
            slack.scale_channel,
            prices=catalog.profiles.values(),
            clock=clock,
            find_workload=known_or_read(services.tracker.workload, cluster.get_workload),
            store=kept,
            live=False,
            cluster=cluster,
            held_workloads=tracked,
            drain_expected_minutes=settings.reaper.drain_expected_minutes,
        )
    bot = Bot(
        app=app,
        cluster=cluster,
        outbox=outbox,
        services=services,
        store=kept,
        scales=scales,
        tick_seconds=tick_seconds,
        telemetry=telemetry,
        url_finder=url_finder,
    )
    telemetry.watch(outbox=outbox, leading=lambda: bot.leading)
    bot.idle_reaper = reaper.Reaper(
        cluster,
        chat,
        settings.reaper_policy(),
        namespace=settings.cluster.namespace,
        live_workloads=tracked,
        clock=clock,
        store=kept,
        metrics=_metrics(settings),
        telemetry=telemetry,
        replica=settings.leader.identity,
        tell_wait_seconds=min(reaper.TELL_WAIT_SECONDS, outbox.settings.post_timeout_seconds),
        start_errors=services.tracker.start_error,
    )
    bot.reap_seconds = settings.reaper.interval_seconds
    if services.warmer is not None:
        services.warmer.on_change = bot.warm_changed
        services.launcher.warm_lines = services.warmer.lines
        if services.home is not None:
            services.home.warm_lines = services.warmer.lines
    if settings.leader.enabled:
        bot.elector = leader.LeaderElector(
            cluster.api,
            namespace=cluster.namespace,
            settings=settings.leader,
            on_started_leading=bot.lead,
            on_stopped_leading=bot.follow,
        )  # the Lease is between replicas, so it keeps real time even when the bot's clock is a sim's
    return bot


def with_home(
    services: Services,
    cluster: kube.KubeCluster,
    chat: OutboxChat,
    kept: ports.Store,
    profiles: Mapping[str, models.GpuProfile],
    admins: frozenset[str],
    clock: Callable[[], datetime],
) -> Services:
    """`/gpu usage` and the App Home, over the tracker's view of the pods and the store's days."""
    tracked = services.tracker
    spending = spend.Spending(
        kept, chat, held=tracked.held_runs, names=tracked.names, admins=admins, clock=clock
    )
    app_home = home.AppHome(
        cluster, chat, spending, profiles=profiles, waiting=tracked.waiting_in_line, clock=clock
    )
    return dataclasses.replace(services, spending=spending, home=app_home)


def served_workspaces(slack: settings_module.SlackSettings, client: WebClient) -> workspaces.Installation:
    """The configured workspaces, else the bot token's own (auth.test, which Bolt's App has just called
    once too: it keeps the answer to itself)."""
    answer = client.auth_test().data
    found = workspaces.installation(
        team_ids=slack.team_ids,
        enterprise_ids=slack.enterprise_ids,
        auth_test=answer if isinstance(answer, dict) else {},
    )
    logger.info(
        "serving Slack workspaces %s, Enterprise Grid orgs %s",
        sorted(found.team_ids) or "(none)",
        sorted(found.enterprise_ids) or "(none)",
    )
    return found


class _QuietRequestHandler(http_server.DeadlineHandlerMixIn, simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http %s: %s", self.address_string(), format % args)


def make_http_server(
    app: App, *, slack: settings_module.SlackSettings, port: int | None = None, host: str = "0.0.0.0"
) -> simple_server.WSGIServer:
    """HTTP mode: Bolt's WSGI adapter behind gpubot's checks, on a server with bounded workers and read
    deadlines (`slack.http_limits`); `serve_forever()` runs it and `shutdown()` stops it, which Bolt's
    SlackAppDevelopmentServer cannot. `port` overrides `slack.http_port`; 0 picks a free port."""
    limits = slack.http_limits
    guarded = slack_http.SlackRequestGuard(
        SlackRequestHandler(app, slack.http_path),
        path=slack.http_path,
        signing_secret=slack.signing_secret,
        max_body_bytes=limits.max_body_bytes,
    )
    address = (host, slack.http_port if port is None else port)
    server = http_server.BoundedWSGIServer(address, _QuietRequestHandler, limits=limits, name="slack-http")
    server.set_app(guarded)
    return server


def _metrics(settings: settings_module.Settings) -> metrics.PrometheusMetrics | None:
    found = settings.reaper
    if not found.prometheus_url:
        logger.info("no GPUBOT_PROMETHEUS_URL: leases are reaped, idleness is not measured")
        return None
    return metrics.PrometheusMetrics(found.prometheus_url, metric=found.gpu_metric)


SOCKET_CLOSED = "Socket Mode connection closed: later commands go to the other replicas"


CONNECT_SECONDS = 10.0
"""How long `connect` waits for the socket to open before it lets the SDK's own reconnects take over."""


def connect(handler: SocketModeHandler, *, timeout: float = CONNECT_SECONDS) -> bool:
    """Open the Socket Mode connection, with the SDK's reconnects off until it is read from; True once
    Slack's `hello` has arrived. The SDK's monitor checks at once and, finding the new socket not open
    yet, starts a second connection while the first goes on running where `hang_up` cannot reach it (the
    replica would keep taking commands after it hung up). Waiting for `hello` rather than the socket's
    opening also means its reader is running: websocket-client opens the socket, then starts reading."""
    client = handler.client
    opened = threading.Event()
    client.on_message_listeners.append(lambda _ws, _message: opened.set())
    client.default_auto_reconnect_enabled = False
    handler.connect()  # type: ignore[no-untyped-call]  # returns before the socket is open
    is_open = opened.wait(timeout)
    client.default_auto_reconnect_enabled = client.auto_reconnect_enabled = True
    return is_open


def hang_up(handler: SocketModeHandler) -> None:
    """End the Socket Mode connection now, for good. Not `handler.close()`, which also joins the client's
    threads and can take ten seconds (websocket-client waits out its ping interval). Their loops are told
    to stop first, unjoined: a session runner still looping would call `run_forever` again 0.5 s later,
    reconnecting the replica that just hung up (or, once Slack is gone, failing every 0.5 s forever)."""
    client = handler.client
    client.closed = True
    client.auto_reconnect_enabled = False
    for runner in (client.current_session_runner, client.current_app_monitor, client.message_processor):
        runner.event.set()
    client.disconnect()
    # The message workers are left idle rather than shut down: the processor's last turn may still hand
    # them a message, and a pool shut down under it raises in that thread.


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def serve(settings: settings_module.Settings, *, clock: Callable[[], datetime] = tracker.wall_clock) -> int:
    """`gpubot serve`: Socket Mode (or HTTP mode with a signing secret) until SIGTERM or Ctrl-C.

    `clock` is for a bot run against a simulated cluster's time, as the restart tests run it."""
    observability.configure_logging(settings.log_level, json_lines=settings.log_json)
    logger.info("gpubot starting with %s", settings.redacted())
    bot = build(settings, clock=clock)
    bot.telemetry.serve(
        port=settings.health_port, ready=bot.unready_reason, deadlines=settings.slack.http_limits
    )
    bot.start()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if settings.slack.mode == "http":
            server = make_http_server(bot.app, slack=settings.slack)
            logger.info("serving Slack requests at :%s%s", server.server_port, settings.slack.http_path)
            bot.slack_connected = lambda: True  # the socket listens from here on; requests queue until served
            try:
                server.serve_forever()
            finally:
                server.server_close()
        else:
            # websocket-client's handler, not the SDK's built-in one: that one's socket keeps Nagle's
            # algorithm on, so in a burst each ack sent while the one before is unacknowledged waits for
            # the server's delayed ACK (40 ms on Linux); websocket-client sets TCP_NODELAY.
            handler = SocketModeHandler(bot.app, settings.slack.app_token)
            try:  # from before the connection opens: a SIGTERM while it does must close it too
                connect(handler)
                bot.slack_connected = handler.client.is_connected
                threading.Event().wait()
            finally:  # first: Slack sends later envelopes to the other replicas' connections
                hang_up(handler)
                logger.info(SOCKET_CLOSED)
    except KeyboardInterrupt:
        logger.info("stopping")
    finally:
        bot.stop()
    return 0
