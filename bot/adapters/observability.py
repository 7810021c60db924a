"""Adapters: what an operator watches: Prometheus metrics, the probe server, and JSON log lines.

Each bot has a metrics registry of its own (not prometheus-client's global one), so several bots can run
in one process, as tests do. What other parts count already (the outbox's counters and depth, leadership)
is read at scrape time rather than mirrored, so the numbers cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.adapters import http_server, slack_outbox
from bot.core import ports
from bot.settings import HttpLimits, redact_urls_in

logger = logging.getLogger(__name__)

TIME_TO_RUNNING_BUCKETS = (30.0, 60.0, 90.0, 120.0, 180.0, 240.0, 300.0, 420.0, 600.0, 900.0, 1200.0, 1800.0)
"""Seconds. A warm node starts a pod within a minute, a scale-up from zero takes about 3 to 10 minutes,
and past 30 minutes something is broken (the autoscaler's max-node-provision-time is 15)."""

Readiness = Callable[[], str | None]
"""Why this replica should get no traffic yet, or None when it is ready."""

DEFAULT_LIMITS = HttpLimits()
PROBE_WORKERS, PROBE_QUEUE = 4, 16
"""The kubelet's probes and a Prometheus scrape or two at a time need only a few workers."""


class Telemetry:
    """The services' `Telemetry` port as Prometheus metrics, and the server that exposes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._commands = Counter(
            "gpubot_commands_total",
            "Slash commands handled, by command and outcome (ok, refused by policy, failed).",
            ["command", "outcome"],
            registry=self.registry,
        )
        self._time_to_running = Histogram(
            "gpubot_time_to_running_seconds",
            "From a workload's pod creation to its container Running, in cluster time.",
            buckets=TIME_TO_RUNNING_BUCKETS,
            registry=self.registry,
        )
        self._scale_ups = Counter(
            "gpubot_scale_ups_total",
            "Workloads whose pod triggered a Cluster Autoscaler scale-up, by node pool.",
            ["pool"],
            registry=self.registry,
        )
        self._reaper_acts = Counter(
            "gpubot_reaper_acts_total",
            "Reaper reminders, idle warnings and deletions, by act (reaping.Act) and dry run.",
            ["act", "dry_run"],
            registry=self.registry,
        )
        self._undelivered = Counter(
            "gpubot_undelivered_total",
            "Reaper messages a thread or a DM refused for good, by act, where (thread, dm) and why "
            "(not-member, archived, gone, refused, no-owner); a thread refused is followed by a DM.",
            ["act", "where", "why"],
            registry=self.registry,
        )
        self._server: ProbeServer | None = None

    # -- the port ------------------------------------------------------------------------------
    def count_command(self, command: str, outcome: ports.CommandOutcome) -> None:
        self._commands.labels(command=command, outcome=outcome).inc()

    def observe_time_to_running(self, seconds: float) -> None:
        self._time_to_running.observe(max(seconds, 0.0))  # clock skew must not make a negative sample

    def count_scale_up(self, pool: str) -> None:
        self._scale_ups.labels(pool=pool or "unknown").inc()

    def count_reaper_act(self, act: str, *, dry_run: bool) -> None:
        self._reaper_acts.labels(act=act, dry_run=str(dry_run).lower()).inc()

    def count_undelivered(self, act: str, *, where: str, why: str) -> None:
        self._undelivered.labels(act=act, where=where, why=why).inc()

    # -- read at scrape time ---------------------------------------------------------------------
    def watch(self, *, outbox: slack_outbox.SlackOutbox, leading: Callable[[], bool]) -> None:
        """Expose the outbox's depth and counters, and whether this replica holds the Lease."""
        self.registry.register(OutboxCollector(outbox))
        leader = Gauge("gpubot_leader", "1 while this replica leads, else 0.", registry=self.registry)
        leader.set_function(lambda: 1.0 if leading() else 0.0)

    def scrape(self) -> bytes:
        """The Prometheus text format, as /metrics serves it."""
        return generate_latest(self.registry)

    # -- the probe server ------------------------------------------------------------------------
    def serve(
        self, *, port: int, ready: Readiness, host: str = "0.0.0.0", deadlines: HttpLimits = DEFAULT_LIMITS
    ) -> ProbeServer:
        """Start /healthz, /readyz and /metrics on their own thread; `stop` ends them. The server keeps the
        header and body timeouts of `deadlines`, with a pool of its own size."""
        if self._server is not None:
            raise RuntimeError("the probe server is running already")
        # Slack's port's deadlines, so a stalled client costs either port as much, with a smaller pool.
        limits = dataclasses.replace(deadlines, workers=PROBE_WORKERS, queue=PROBE_QUEUE)
        try:
            server = ProbeServer(self, ready, host=host, port=port, limits=limits)
        except OSError as err:
            raise OSError(f"the probe server cannot listen on {host}:{port}: {err.strerror or err}") from err
        server.start()
        logger.info("serving /healthz, /readyz and /metrics on :%s", server.port)
        self._server = server
        return server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class OutboxCollector(Collector):
    """The outbox's own counters and queue depth, read when Prometheus scrapes."""

    COUNTERS = (
        ("sent", "gpubot_slack_calls_total", "Slack Web API calls that succeeded."),
        ("rate_limited", "gpubot_slack_rate_limited_total", "HTTP 429 answers from Slack (each is retried)."),
        ("retried", "gpubot_slack_retries_total", "Failed Slack calls tried again, 429s included."),
        ("coalesced", "gpubot_slack_edits_coalesced_total", "Message edits replaced by a newer one unsent."),
        ("failed", "gpubot_slack_dropped_total", "Slack calls refused for good (bad request, no channel)."),
    )

    def __init__(self, outbox: slack_outbox.SlackOutbox) -> None:
        self._outbox = outbox

    def collect(self) -> Iterable[Metric]:
        counted = self._outbox.counters()
        for field, name, documentation in self.COUNTERS:
            yield CounterMetricFamily(name, documentation, value=getattr(counted, field))
        yield GaugeMetricFamily(
            "gpubot_slack_outbox_depth",
            "Slack calls queued or in flight in the outbox.",
            value=self._outbox.depth(),
        )


SHUTDOWN_POLL_SECONDS = 0.05


class ProbeServer(http_server.BoundedHTTPServer):
    """A small threaded HTTP server: liveness, readiness, and the metrics."""

    def __init__(
        self, telemetry: Telemetry, ready: Readiness, *, host: str, port: int, limits: HttpLimits
    ) -> None:
        self.telemetry = telemetry
        self.ready = ready
        super().__init__((host, port), _ProbeHandler, limits=limits, name="probes")
        self._thread = threading.Thread(target=self._serve, name="gpubot-probes", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        # `shutdown` waits for the loop to look up, every `poll_interval` (0.5 s by default): a stopping
        # bot, which stops this last, would spend most of its exit here.
        self.serve_forever(poll_interval=SHUTDOWN_POLL_SECONDS)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()


class _ProbeHandler(http_server.DeadlineHandlerMixIn, BaseHTTPRequestHandler):
    server: ProbeServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._send(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
        elif path == "/readyz":
            reason = self._unready_reason()
            body = {"ready": True} if reason is None else {"ready": False, "reason": reason}
            status = HTTPStatus.OK if reason is None else HTTPStatus.SERVICE_UNAVAILABLE
            self._send(status, json.dumps(body).encode() + b"\n", "application/json")
        elif path == "/metrics":
            self._send(HTTPStatus.OK, self.server.telemetry.scrape(), CONTENT_TYPE_LATEST)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found: try /healthz, /readyz or /metrics\n", "text/plain")

    def _unready_reason(self) -> str | None:
        try:
            return self.server.ready()
        except Exception as err:  # a probe must answer; a broken check means not ready, and says why
            logger.exception("readiness check failed")
            return f"readiness check failed: {err}"

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("probe %s: %s", self.address_string(), format % args)


# -- logs -------------------------------------------------------------------------------------------

_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
"""A LogRecord's own attributes; anything else on a record came from `extra=` and is logged as a field."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (RFC 3339, UTC), level, logger, message, then the `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        entry.update(
            time=rfc3339(record.created),
            level=record.levelname,
            logger=record.name,
            message=record.getMessage(),
        )
        if record.exc_info:
            entry["exception"] = record.exc_text or self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def rfc3339(timestamp: float) -> str:
    """`2024-05-01T09:30:00.123Z`: milliseconds, as log pipelines sort and parse them."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class UrlPasswordFilter(logging.Filter):
    """Masks `scheme://user:password@` in every line, whoever logs it (gpubot, urllib3, an exception's
    text): a URL's password reaches the log through settings, errors and libraries alike (issue 21)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact_urls_in(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_urls_in(record.exc_text)
        return True


def configure_logging(level: str, *, json_lines: bool) -> None:
    """Set the root level, and with `json_lines` make every root handler write JSON (one is added if none);
    every root handler masks URL passwords."""
    root = logging.getLogger()
    root.setLevel(level)
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    for handler in root.handlers:
        if not any(isinstance(f, UrlPasswordFilter) for f in handler.filters):
            handler.addFilter(UrlPasswordFilter())
    if json_lines:
        for handler in root.handlers:
            handler.setFormatter(JsonFormatter())
