"""A running gpubot: informers started, threads resumed, the leader's timers (reaper, ticks, warm edges).

What `app.build` wires together; `start` brings it up, `lead` and `follow` switch it with the Lease, `stop`
drains and closes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from slack_bolt import App

from bot.adapters import kube, leader, observability, slack_outbox, store
from bot.adapters import kueue as kueue_adapter
from bot.core import ports, warm
from bot.services import Services, kueue_line, reaper, scale_notifier
from bot.services import connect as connect_service

logger = logging.getLogger(__name__)

SYNC_TIMEOUT_SECONDS = 30.0
"""How long start-up waits for the informers' initial lists before resuming threads with what it has."""
WARM_MISFIRE_SECONDS = 600
"""A warm edge missed by up to this much (a busy or restarting replica) still fires; later ones wait for
the next edge, or the catch-up a new leader does."""
TICK_SECONDS = 15.0
"""How often timers look for what no watch reports (a node far later than usual)."""


@dataclass
class Bot:
    """Everything one running gpubot holds; `start` resumes threads, `stop` drains and closes."""

    app: App
    cluster: kube.KubeCluster
    outbox: slack_outbox.SlackOutbox
    services: Services
    store: store.RedisStore | store.MemoryStore
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
    kueue: tuple[kueue_adapter.KueueWatch, kueue_line.KueueLine] | None = None
    """Kueue's informers and the line they feed, when a profile has `queue:`."""

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
        on_event: ports.WatchCallback = watcher.on_event
        on_node: ports.WatchCallback = watcher.on_node
        if self.scales is not None:
            self.scales.seed(self.cluster.list_nodes())
            on_event = fan_out(watcher.on_event, self.scales.on_event)
            on_node = fan_out(watcher.on_node, self.scales.on_node)
        self.cluster.start_informers(on_pod=watcher.on_pod, on_event=on_event, on_node=on_node)
        if self.kueue is not None:
            kueue_watch, line = self.kueue
            kueue_watch.start(
                on_workload=line.on_workload,
                on_local_queue=line.on_local_queue,
                on_cluster_queue=line.on_cluster_queue,
            )
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
        self.store.close()
        self.telemetry.stop()


def fan_out(*callbacks: ports.WatchCallback) -> ports.WatchCallback:
    """One informer, several listeners: each gets every change, in order."""

    def deliver(change: str, obj: Mapping[str, Any]) -> None:
        for callback in callbacks:
            callback(change, obj)

    return deliver
