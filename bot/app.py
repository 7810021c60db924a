"""The composition root: Settings → adapters (cluster, outbox) → services → a Bolt App with gpubot's handlers.

The only module that knows every zone, so everything else stays swappable. `build` hands every part in at
construction and returns a `runtime.Bot`; `gpubot serve` (bot/cli/serve.py) runs it until SIGTERM.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from kubernetes.config.config_exception import ConfigException
from slack_bolt import App
from slack_sdk import WebClient

import handlers
from bot import profiles as profiles_module
from bot import runtime
from bot import settings as settings_module
from bot.adapters import (
    jupyter,
    kube,
    leader,
    metrics,
    observability,
    outbox_journal,
    slack_chat,
    slack_outbox,
    slack_render,
    store,
)
from bot.adapters import kueue as kueue_adapter
from bot.adapters import reservations as quota_reservations
from bot.core import models, notebooks, pools, ports, workloads, workspaces
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
from bot.services import kueue_line as kueue_line_service
from bot.services import logs as logs_service
from bot.services import warm as warm_service

logger = logging.getLogger(__name__)


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
        return kube.connect(found)
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
    tick_seconds: float = runtime.TICK_SECONDS,
    outbox_settings: slack_outbox.OutboxSettings | None = None,
) -> runtime.Bot:
    """Wire one bot; nothing runs until `Bot.start` (informers) and a Socket Mode or HTTP handler (Slack).

    `outbox_settings` lift Slack's pacing for a Slack that allows more (the soak's emulator)."""
    slack = settings.slack
    catalog = profiles_module.read_profile_catalog(settings)
    cluster = cluster or connect_cluster(settings)
    kept = store.open_store(settings.redis.url, prefix=settings.redis.key_prefix)
    outbox = slack_outbox.SlackOutbox(
        slack_outbox.make_client(slack.bot_token, base_url=slack.api_base_url),
        outbox_settings,
        journal=outbox_journal.OutboxJournal(kept, replica=settings.leader.identity),
    )
    chat = slack_chat.OutboxChat(outbox)
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
    ledger = reservations.Ledger(quota_reservations.open_reservations(kept))
    lease_service = leases.Leases(cluster, chat, launch, clock=clock, ledger=ledger)
    # The finder tells the tracker what it read, and the tracker asks the finder to look: the lambda
    # reaches the tracker made on the next line.
    url_finder = connect_service.UrlFinder(
        cluster.follow_log, found=lambda key, url: workload_tracker.url_found(key, url)
    )
    kueue_watch, kueue_line = None, None
    if any(profile.queue for profile in catalog.profiles.values()):
        kueue_watch = kueue_adapter.KueueWatch(cluster)
        kueue_line = kueue_line_service.KueueLine(
            catalog.profiles.values(), read_pending=kueue_watch.pending_in, clock=clock
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
        kueue_line=kueue_line,
    )
    warmer = warm_service.Warmer(
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
        on_change=lambda: bot.warm_changed(),
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
        warm_lines=warmer.lines,
    )
    # `/gpu usage` and the App Home, over the tracker's view of the pods and the store's days.
    spending = spend.Spending(
        kept,
        chat,
        held=workload_tracker.held_runs,
        names=workload_tracker.names,
        policy=settings.policy(),
        clock=clock,
    )
    services = Services(
        launcher=run_launcher,
        forms=forms_service.RunForms(cluster, chat, launch, run_launcher, store=kept),
        leases=lease_service,
        logs=logs_service.Logs(cluster, chat, lease_service, fits=slack_render.code_block_fits),
        tracker=workload_tracker,
        store=kept,
        warmer=warmer,
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
            read_kueue=kueue_watch.read_facts if kueue_watch is not None else None,
        ),
        asks=asks_service.Asks(
            cluster,
            chat,
            lease_service,
            clock=clock,
            once_per=settings.reaper_policy().idle_window,
            store=kept,
        ),
        spending=spending,
        home=home.AppHome(
            cluster,
            chat,
            spending,
            profiles=catalog.profiles,
            waiting=workload_tracker.waiting_in_line,
            clock=clock,
            warm_lines=warmer.lines,
        ),
    )
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
    idle_reaper = reaper.Reaper(
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
        notebooks_seen=_notebooks(catalog.profiles, cluster, services.tracker),
    )
    # The elector's callbacks (and the warmer's, below) reach the bot made next; neither runs before
    # `Bot.start`. The Lease is between replicas, so it keeps real time even when the bot's clock is a sim's.
    elector = (
        leader.LeaderElector(
            cluster.api,
            namespace=cluster.namespace,
            settings=settings.leader,
            on_started_leading=lambda: bot.lead(),
            on_stopped_leading=lambda: bot.follow(),
        )
        if settings.leader.enabled
        else None
    )
    bot = runtime.Bot(
        app=app,
        cluster=cluster,
        outbox=outbox,
        services=services,
        store=kept,
        scales=scales,
        elector=elector,
        idle_reaper=idle_reaper,
        reap_seconds=settings.reaper.interval_seconds,
        tick_seconds=tick_seconds,
        telemetry=telemetry,
        url_finder=url_finder,
        kueue=(kueue_watch, kueue_line) if kueue_watch is not None and kueue_line is not None else None,
    )
    telemetry.watch(outbox=outbox, leading=lambda: bot.leading)
    return bot


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


def _notebooks(
    profiles: Mapping[str, models.GpuProfile], cluster: kube.KubeCluster, threads: tracker.Tracker
) -> reaper.Notebooks | None:
    """What reads a notebook's Jupyter, when a profile has `activity: jupyter`."""
    watched = frozenset(name for name, profile in profiles.items() if profile.activity == notebooks.JUPYTER)
    if not watched:
        return None
    return reaper.Notebooks(jupyter.JupyterReader(cluster.api), watched, threads.url)


def _metrics(settings: settings_module.Settings) -> metrics.PrometheusMetrics | None:
    found = settings.reaper
    if not found.prometheus_url:
        logger.info("no GPUBOT_PROMETHEUS_URL: leases are reaped, idleness is not measured")
        return None
    return metrics.PrometheusMetrics(found.prometheus_url, metric=found.gpu_metric)
