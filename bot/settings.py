"""The one place gpubot reads its environment; everything else gets these values (`bot.profiles` reads the
GPU profiles file they name).

Every problem is collected and reported together at start-up, naming the variable, so an operator fixes a
deployment in one go instead of one crash at a time.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import socket
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from bot.core import commands, labels, leadership, models, podsecurity, reaping, warm

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SlackMode = Literal["socket", "http"]
REDACTED = "***"
DEFAULT_WORKLOAD_NAMESPACE = "gpubot-workloads"
"""Workloads apart from the bot's own namespace and Secret; the chart creates it, enforcing "restricted"."""


class SettingsError(ValueError):
    """The environment or the profiles file is unusable; the message lists every problem found."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems) or (" ".join(message.split()),)
        """Each problem on its own, naming the variable or YAML path to fix."""

    def one_line(self) -> str:
        """Every problem on one line, for a command that says why it cannot start and exits."""
        return "; ".join(self.problems)


MIB = 1024 * 1024
DAY_MINUTES = 24 * 60
T = TypeVar("T")
S = TypeVar("S", bound="DataclassInstance")
ENV = "gpubot.env"
"""The key of a field's metadata naming the environment variable it is read from."""


@dataclass(frozen=True)
class Variable:
    """Where a setting comes from: its environment variable, and the bounds a number read there must keep."""

    name: str
    minimum: float = -math.inf
    maximum: float = math.inf


def setting(
    name: str, default: T, *, minimum: float = -math.inf, maximum: float = math.inf, secret: bool = False
) -> T:
    """A field read from the environment variable `name`, with its default and bounds stated beside it
    (`_EnvReader.value` reads it); a `secret` one stays out of the dataclass's repr."""
    found: T = field(default=default, repr=not secret, metadata={ENV: Variable(name, minimum, maximum)})
    return found


def variable(section: type[Any], name: str) -> Variable:
    """The variable field `name` of the settings class `section` is read from."""
    found: Variable = next(f for f in dataclasses.fields(section) if f.name == name).metadata[ENV]
    return found


@dataclass(frozen=True)
class HttpLimits:
    """What one HTTP client may cost a replica (issue 21: one unsigned 200 MB POST peaked at 1.3 GB, and
    1,500 connections that never finished their headers held 1,510 threads). docs/deploy.md, HTTP mode."""

    max_body_bytes: int = setting("GPUBOT_HTTP_MAX_BODY_BYTES", MIB, minimum=64 * 1024, maximum=64 * MIB)
    """A larger request is refused (413) from its Content-Length, unread. Slack documents no ceiling for
    what it POSTs; gpubot receives slash commands and clicks on its own messages. A command's text is
    at most 4,000 characters (commands.MAX_TEXT_LENGTH; 36 KB form-encoded if all were 3-byte UTF-8), and
    a click carries the clicked message (docs.slack.dev/reference/interaction-payloads/block_actions-payload),
    which slack_render keeps within Block Kit's 50 blocks (docs.slack.dev/reference/block-kit/blocks).
    As the emulator sends them: `/gpu status` 0.4 KB, a 4,000-character `/gpu run` 4.3 KB, a click on a
    thread root 4.1 KB. 1 MiB leaves a wide margin over those, and `workers` such bodies in flight stay
    far inside the chart's 512 Mi."""
    header_timeout_seconds: float = setting(
        "GPUBOT_HTTP_HEADER_TIMEOUT_SECONDS", 10.0, minimum=0.1, maximum=300
    )
    """From the accept to the end of the headers. Slack waits 3 s for an answer, so a request slower
    than this is lost anyway; a connection that never finishes its headers holds a worker this long."""
    body_timeout_seconds: float = setting("GPUBOT_HTTP_BODY_TIMEOUT_SECONDS", 10.0, minimum=0.1, maximum=300)
    """From the end of the headers to the end of the body (1 MiB at 1 Mbit/s takes 8.4 s); also how long
    writing the answer may take."""
    workers: int = setting("GPUBOT_HTTP_WORKERS", 16, minimum=1, maximum=256)
    """Threads that serve requests. An ack is parse-and-answer (milliseconds), so 16 serve hundreds a
    second; each holds at most one body, so together at most 16 MiB of bodies."""
    queue: int = setting("GPUBOT_HTTP_QUEUE", 64, minimum=1, maximum=4096)
    """Accepted connections waiting for a worker; a connection that finds the queue full is answered 503
    at once and closed, so a flood costs no thread and no file handle."""


@dataclass(frozen=True)
class SlackSettings:
    bot_token: str = field(repr=False, metadata={ENV: Variable("SLACK_BOT_TOKEN")})
    """`xoxb-…`; needed in both modes."""
    app_token: str = setting("SLACK_APP_TOKEN", "", secret=True)
    """`xapp-…`; Socket Mode only."""
    signing_secret: str = setting("SLACK_SIGNING_SECRET", "", secret=True)
    """HTTP mode only: verifies that requests come from Slack."""
    api_base_url: str = setting("SLACK_API_URL", "https://slack.com/api/")
    """Where the Web API lives; tests and the demo point this at the emulator."""
    mode: SlackMode = setting("SLACK_MODE", "socket")
    """Socket Mode by default: no public URL needed."""
    http_port: int = setting("PORT", 3000, minimum=1, maximum=65535)
    http_path: str = setting("SLACK_HTTP_PATH", "/slack/events")
    http_limits: HttpLimits = HttpLimits()
    """HTTP mode only: the bounds on one request and on the server's threads."""
    scale_channel: str = setting("GPUBOT_SCALE_CHANNEL", "")
    """Channel id for one message per scale episode; empty turns channel notifications off."""
    team_ids: frozenset[str] = setting("GPUBOT_SLACK_TEAM_IDS", frozenset())
    """Workspaces (`T…`) whose users gpubot serves, a comma or space list. With this and enterprise_ids
    both empty, the bot token's own workspace from auth.test at start-up: requests from any other are
    refused, since Slack user ids are unique only within a workspace (issue 21)."""
    enterprise_ids: frozenset[str] = setting("GPUBOT_SLACK_ENTERPRISE_IDS", frozenset())
    """Enterprise Grid orgs (`E…`) whose every workspace gpubot serves, for an org-wide install; a request
    naming another org is refused even from a listed team."""


@dataclass(frozen=True)
class ClusterSettings:
    kubeconfig: str = setting("KUBECONFIG", "")
    """Path to a kubeconfig; empty means the client's default (`~/.kube/config`) unless in-cluster."""
    context: str = setting("GPUBOT_KUBE_CONTEXT", "")
    namespace: str = setting("GPUBOT_NAMESPACE", DEFAULT_WORKLOAD_NAMESPACE)
    """Where gpubot creates and watches its pods (and keeps its Lease and warm schedules): a namespace of
    their own, apart from the bot and its Slack Secret, which can enforce Pod Security "restricted"."""
    in_cluster: bool = setting("GPUBOT_IN_CLUSTER", False)
    """Use the pod's service account; `from_env` defaults to it inside Kubernetes (KUBERNETES_SERVICE_HOST)
    without KUBECONFIG."""
    pod_security: models.PodSecurity = field(default_factory=models.PodSecurity)
    """The securityContext every workload pod gets unless its profile departs (GPUBOT_RUN_AS_NON_ROOT,
    default true; GPUBOT_RUN_AS_USER, default 1000; GPUBOT_READ_ONLY_ROOT_FILESYSTEM); no privilege
    escalation, no capabilities and no host paths always."""


@dataclass(frozen=True)
class RedisSettings:
    url: str = setting("REDIS_URL", "redis://localhost:6379/0", secret=True)
    key_prefix: str = setting("GPUBOT_REDIS_PREFIX", "gpubot:")
    """Keys are namespaced so one Redis can serve several bots."""


@dataclass(frozen=True)
class ReaperSettings:
    default_lease_hours: float = setting(
        "GPUBOT_DEFAULT_LEASE_HOURS", 4.0, minimum=0.1, maximum=commands.MAX_HOURS
    )
    """A lease long enough for an experiment, short enough that a forgotten GPU is reclaimed the same day."""
    max_lease_hours: float = setting("GPUBOT_MAX_LEASE_HOURS", 24.0, minimum=0.1, maximum=commands.MAX_HOURS)
    """The longest lease one `/gpu run --hours` may ask for."""
    max_total_lease_hours: float = setting("GPUBOT_MAX_TOTAL_LEASE_HOURS", 72.0, maximum=24 * 365)
    """Cap on a lease's whole length, extensions included: a weekend, not a month. At least the longest
    lease (`from_env` defaults to it when that is longer than 72 h)."""
    reminder_minutes: float = setting("GPUBOT_REMINDER_MINUTES", 15.0, minimum=0, maximum=DAY_MINUTES)
    """Minutes before the lease ends when the owner gets a reminder with Extend and Release buttons."""
    nudge_minutes: float = setting("GPUBOT_NUDGE_MINUTES", 3.0, minimum=0, maximum=DAY_MINUTES)
    """The last nudge, this close to the end."""
    grace_minutes: float = setting("GPUBOT_GRACE_MINUTES", 5.0, minimum=0, maximum=DAY_MINUTES)
    """After the lease end, before the delete: room to press Extend on a reminder read late."""
    idle_threshold_percent: float = setting("GPUBOT_IDLE_THRESHOLD_PERCENT", 5.0, minimum=0, maximum=100)
    idle_window_minutes: float = setting("GPUBOT_IDLE_WINDOW_MINUTES", 45.0, minimum=1, maximum=DAY_MINUTES)
    """GPU use below the threshold for this long, by the metric, makes a workload idle."""
    idle_grace_minutes: float = setting("GPUBOT_IDLE_GRACE_MINUTES", 15.0, minimum=0, maximum=DAY_MINUTES)
    """After the idle warning, before the release, unless the owner keeps it."""
    finished_retention_minutes: float = setting(
        "GPUBOT_FINISHED_RETENTION_MINUTES", 60.0, minimum=0, maximum=30 * DAY_MINUTES
    )
    """Finished pods stay this long so their logs can be read."""
    broken_start_minutes: float = setting("GPUBOT_BROKEN_START_MINUTES", 10.0, minimum=1, maximum=DAY_MINUTES)
    """A pod unable to start this long (ImagePullBackOff, CrashLoopBackOff, CreateContainerConfigError) is
    released with the reason in its thread, so its GPU node can drain; one that never can, at once."""
    prometheus_url: str = setting("GPUBOT_PROMETHEUS_URL", "", secret=True)
    """Prometheus HTTP API with the DCGM exporter's metrics; empty turns idleness detection off. A
    `user:password@` in it is sent as HTTP basic auth, and masked wherever the URL is logged."""
    gpu_metric: str = setting("GPUBOT_GPU_METRIC", "DCGM_FI_DEV_GPU_UTIL")
    """Or DCGM_FI_PROF_GR_ENGINE_ACTIVE (a 0-1 ratio), whichever the exporter is set to collect."""
    interval_seconds: float = setting("GPUBOT_REAPER_INTERVAL_SECONDS", 60.0, minimum=1, maximum=3600)
    """How often the reaper looks; leases are in hours, so a minute of lateness is harmless."""
    dry_run: bool = setting("GPUBOT_REAPER_DRY_RUN", False)
    """Post and log what the reaper would do; change nothing."""
    drain_expected_minutes: float = setting(
        "GPUBOT_DRAIN_EXPECTED_MINUTES", 15.0, minimum=1, maximum=DAY_MINUTES
    )
    """A GPU pool still up this long after gpubot's last workload on it left gets told why in the scale
    channel: the autoscaler's scale-down-unneeded-time (10 min by default) plus a margin of 5."""


@dataclass(frozen=True)
class QuotaSettings:
    max_gpus_per_user: int = setting("GPUBOT_MAX_GPUS_PER_USER", 2, minimum=0, maximum=1024)
    """GPUs one user may hold (running or pending) at once."""
    admins: frozenset[str] = setting("GPUBOT_ADMINS", frozenset())
    """Slack user ids who may release anyone's workload, a comma or space list."""


@dataclass(frozen=True)
class ProfileSettings:
    profiles_file: str = setting("GPUBOT_PROFILES_FILE", "")
    """YAML file of GPU profiles; empty means the built-in `t4` profile matching the seed's pool."""
    default_profile: str = setting("GPUBOT_DEFAULT_PROFILE", "")
    """Overrides the file's `default:`."""


@dataclass(frozen=True)
class CloudSettings:
    """Where the GPU pool's cloud API answers; `gpubot pool` flags override these."""

    gke_endpoint: str = setting("GPUBOT_GKE_ENDPOINT", "")
    """Container API base URL; empty is Google's. A plain-http URL is a local emulator such as `gpubot sim`,
    so no credentials are sent there: no real cloud answers on plain http."""
    eks_endpoint: str = setting("GPUBOT_EKS_ENDPOINT", "")
    autoscaling_endpoint: str = setting("GPUBOT_AUTOSCALING_ENDPOINT", "")
    """EKS and EC2 Auto Scaling endpoint URLs; empty is AWS's regional ones (the sim serves both on one)."""
    aws_region: str = setting("AWS_REGION", "")
    """Else AWS_DEFAULT_REGION; empty: boto3's own lookup (~/.aws/config)."""
    poll_seconds: float = setting("GPUBOT_CLOUD_POLL_SECONDS", 5.0, minimum=0.1, maximum=300)
    """At most this long between two looks at a cloud change still running (gcloud's own poll period); the
    first looks come sooner (0.5, 1, 2, 4 s), so a quick change is seen quickly."""
    timeout_seconds: float = setting("GPUBOT_CLOUD_TIMEOUT_SECONDS", 1800.0, minimum=1, maximum=4 * 3600)
    """How long a pool change may take before gpubot stops waiting: gcloud's node-pools create timeout."""
    provider: str = setting("GPUBOT_CLOUD", "")
    """`gke` or `eks`: where the bot itself reads and resizes pools (pre-warm, `/gpu doctor`); empty: none."""
    cluster_name: str = setting("GPUBOT_CLOUD_CLUSTER", "")
    """The cluster's name at its cloud."""
    project: str = setting("GPUBOT_GKE_PROJECT", "")
    location: str = setting("GPUBOT_GKE_LOCATION", "")
    """GKE only: the project, and the cluster's zone or region."""


@dataclass(frozen=True)
class WarmSettings:
    schedules: tuple[models.WarmSchedule, ...] = setting("GPUBOT_WARM_SCHEDULES", ())
    """One per line (or `;`-separated); `/gpu warm` adds more at run time."""
    configmap: str = setting("GPUBOT_WARM_CONFIGMAP", "gpubot-warm")
    """Where `/gpu warm` keeps its schedules, in the workload namespace, so every replica reads the same."""


def default_identity() -> str:
    """hostname-pid: unique per replica even when two share a host (client-go examples use the hostname)."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class LeaderSettings:
    enabled: bool = setting("GPUBOT_LEADER_ELECTION", True)
    """Off only for a lone replica that should speak without a Lease."""
    lease_name: str = setting("GPUBOT_LEADER_LEASE", "gpubot-leader")
    """The coordination.k8s.io/v1 Lease the replicas compete for, in the workload namespace
    (GPUBOT_NAMESPACE), where the chart's Role grants get and update on this name alone."""
    identity: str = field(default_factory=default_identity, metadata={ENV: Variable("POD_NAME")})
    """This replica in `holderIdentity`: the pod name (POD_NAME from the downward API), else hostname-pid."""
    lease_duration_seconds: int = setting("GPUBOT_LEADER_LEASE_SECONDS", 30, minimum=2, maximum=3600)
    """How long after the last renewal the others wait before taking over.
    Twice client-go's usual 15 s: the leader's work (reaper rounds, scale notices) is minute-scale, so a
    failover of up to ~40 s costs little, and renewals every 8 s instead of 2 s keep the bot's steady
    Kubernetes load under 10 requests a minute (docs/benchmarks.md, P3)."""
    renew_deadline_seconds: float = setting(
        "GPUBOT_LEADER_RENEW_DEADLINE_SECONDS", 20.0, minimum=1, maximum=3600
    )
    """A leader that could not renew for this long steps down; shorter than the lease, so it stops first."""
    retry_period_seconds: float = setting("GPUBOT_LEADER_RETRY_SECONDS", 8.0, minimum=0.1, maximum=600)
    """Between a candidate's tries, and between a leader's renewals."""


@dataclass(frozen=True)
class Settings:
    slack: SlackSettings
    cluster: ClusterSettings = ClusterSettings()
    redis: RedisSettings = RedisSettings()
    reaper: ReaperSettings = ReaperSettings()
    quota: QuotaSettings = QuotaSettings()
    profiles: ProfileSettings = ProfileSettings()
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    cloud: CloudSettings = CloudSettings()
    warm: WarmSettings = WarmSettings()
    log_level: str = setting("LOG_LEVEL", "INFO")
    log_json: bool = setting("GPUBOT_LOG_FORMAT", False)
    """One JSON object per log line (`json`, or `text`), for a log pipeline; `from_env` (so `gpubot serve`)
    defaults to it."""
    health_port: int = setting("GPUBOT_HEALTH_PORT", 8080, minimum=0, maximum=65535)
    """Where /healthz, /readyz and /metrics listen; 0 picks a free port."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from `environ` (default: the process environment), or raise SettingsError."""
        return _read_environment(environ, _read_settings)

    def policy(self) -> models.QuotaPolicy:
        """The core's view of quota and lease limits."""
        return models.QuotaPolicy(
            max_gpus_per_user=self.quota.max_gpus_per_user,
            default_lease_hours=self.reaper.default_lease_hours,
            max_lease_hours=self.reaper.max_lease_hours,
            admins=self.quota.admins,
        )

    def reaper_policy(self) -> reaping.ReaperPolicy:
        """The core's view of the reaper's timings."""
        found = self.reaper
        return reaping.ReaperPolicy(
            remind_before=timedelta(minutes=found.reminder_minutes),
            nudge_before=timedelta(minutes=found.nudge_minutes),
            grace=timedelta(minutes=found.grace_minutes),
            idle_threshold_percent=found.idle_threshold_percent,
            idle_window=timedelta(minutes=found.idle_window_minutes),
            idle_grace=timedelta(minutes=found.idle_grace_minutes),
            finished_retention=timedelta(minutes=found.finished_retention_minutes),
            broken_start=timedelta(minutes=found.broken_start_minutes),
            max_total_hours=found.max_total_lease_hours,
            dry_run=found.dry_run,
        )

    def redacted(self) -> dict[str, Any]:
        """Everything, fit to log at start-up: tokens and secrets masked, passwords cut from the Redis URL."""
        slack = self.slack
        return {
            "slack": vars(slack)
            | {
                "bot_token": _mask(slack.bot_token),
                "app_token": _mask(slack.app_token),
                "signing_secret": _mask(slack.signing_secret),
                "api_base_url": redact_url(slack.api_base_url),
                "http_limits": vars(slack.http_limits).copy(),
                "team_ids": sorted(slack.team_ids),
                "enterprise_ids": sorted(slack.enterprise_ids),
            },
            "cluster": vars(self.cluster).copy(),
            "redis": vars(self.redis) | {"url": redact_url(self.redis.url)},
            "reaper": vars(self.reaper) | {"prometheus_url": redact_url(self.reaper.prometheus_url)},
            "quota": vars(self.quota) | {"admins": sorted(self.quota.admins)},
            "profiles": vars(self.profiles).copy(),
            "leader": vars(self.leader).copy(),
            "cloud": {k: redact_url(v) if k.endswith("endpoint") else v for k, v in vars(self.cloud).items()},
            "warm": {"schedules": [s.text for s in self.warm.schedules], "configmap": self.warm.configmap},
            "log_level": self.log_level,
            "log_json": self.log_json,
            "health_port": self.health_port,
        }


def _mask(secret: str) -> str:
    return REDACTED if secret else ""


def redact_url(url: str) -> str:
    """`redis://:secret@host:6379/0` → `redis://:***@host:6379/0`."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{host}"))


_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)[^\s/?#]*@")
"""`scheme://user:` then the password up to the authority's last `@` (as urlsplit reads it)."""


def redact_urls_in(text: str) -> str:
    """Every `scheme://user:password@` in free text (a log line, an error) with the password masked."""
    return _URL_PASSWORD.sub(lambda found: f"{found['head']}{REDACTED}@", text)


def strip_credentials(url: str) -> tuple[str, str]:
    """(`url` without its `user:password@`, `user:password` unquoted or ""): a client sends the pair as
    basic auth, since urllib3 drops a URL's userinfo without a word."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, ""
    bare = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    user = urllib.parse.unquote(parts.username or "")
    return bare, f"{user}:{urllib.parse.unquote(parts.password or '')}"


# --- environment -----------------------------------------------------------------------------------------

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


class _EnvReader:
    """Typed reads of environment variables that collect problems instead of raising on the first."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []

    def text(self, name: str, default: str = "") -> str:
        return self.environ.get(name, default).strip()

    def flag(self, name: str, default: bool = False) -> bool:
        raw = self.text(name).lower()
        if name not in self.environ:
            return default
        if raw in _TRUE or raw in _FALSE:
            return raw in _TRUE
        self.problems.append(f"{name}={raw!r}: expected true or false")
        return default

    def number(self, name: str, default: float, *, minimum: float, maximum: float) -> float:
        raw = self.text(name)
        try:
            value = float(raw) if raw else default
        except ValueError:
            value = float("nan")
        return self._bounded(name, raw, value, default, minimum=minimum, maximum=maximum)

    def integer(self, name: str, default: int, *, minimum: float, maximum: float) -> int:
        raw = self.text(name)
        if raw and not re.fullmatch(r"-?[0-9]+", raw):
            self.problems.append(f"{name}={raw!r}: expected a whole number")
            return default
        value = int(raw) if raw else default
        return int(self._bounded(name, raw, value, default, minimum=minimum, maximum=maximum))

    def _bounded(
        self, name: str, raw: str, value: float, default: float, *, minimum: float, maximum: float
    ) -> float:
        if minimum <= value <= maximum:  # also false for NaN, the marker for "not a number"
            return value
        self.problems.append(f"{name}={raw!r}: expected a number from {minimum:g} to {maximum:g}")
        return default

    def value(
        self, section: type[Any], name: str, *, default: Any = None, minimum: float | None = None
    ) -> Any:
        """Field `name` of `section` as its variable sets it: a flag, a whole number, a number or text, by its
        default's type, within its bounds. `default` and `minimum` replace the field's own where they depend
        on another setting; a collection comes as its variable's text, for the caller to parse."""
        spec = next(f for f in dataclasses.fields(section) if f.name == name)
        found: Variable = spec.metadata[ENV]
        fallback = spec.default if default is None else default
        low = found.minimum if minimum is None else minimum
        if isinstance(fallback, bool):
            return self.flag(found.name, fallback)
        if isinstance(fallback, int):
            return self.integer(found.name, fallback, minimum=low, maximum=found.maximum)
        if isinstance(fallback, float):
            return self.number(found.name, fallback, minimum=low, maximum=found.maximum)
        return self.text(found.name, fallback if isinstance(fallback, str) else "")

    def section(self, section: type[S], **known: Any) -> S:
        """`section` with each field that names a variable read from it, except those in `known`, which the
        caller read (and checked against the others) itself; fields without a variable keep their default."""
        values = {
            spec.name: known[spec.name] if spec.name in known else self.value(section, spec.name)
            for spec in dataclasses.fields(section)
            if spec.name in known or ENV in spec.metadata
        }
        make: Callable[..., S] = section
        return make(**values)

    def require(self, name: str, what: str) -> str:
        """A variable that must be set; `what` says what it holds and where to find it."""
        value = self.text(name)
        if not value:
            self.problems.append(f"{name} is not set ({what})")
        return value


BOT_TOKEN_HELP = "the bot token, xoxb-…, from your Slack app's OAuth & Permissions page"
APP_TOKEN_HELP = (
    "Socket Mode's app-level token, xapp-…, from your Slack app's Basic Information page; "
    "or SLACK_MODE=http with SLACK_SIGNING_SECRET"
)
SIGNING_SECRET_HELP = "HTTP mode's signing secret, from your Slack app's Basic Information page"
HTTP_URL = re.compile(r"https?://[^\s/]+(/\S*)?")


def _read_slack(env: _EnvReader) -> SlackSettings:
    mode = env.value(SlackSettings, "mode").lower()
    if mode not in ("socket", "http"):
        env.problems.append(f"SLACK_MODE={mode!r}: expected socket or http")
        mode = "socket"
    bot_token = env.require("SLACK_BOT_TOKEN", BOT_TOKEN_HELP)
    app_token = (
        env.require("SLACK_APP_TOKEN", APP_TOKEN_HELP)
        if mode == "socket"
        else env.value(SlackSettings, "app_token")
    )
    secret = (
        env.require("SLACK_SIGNING_SECRET", SIGNING_SECRET_HELP)
        if mode == "http"
        else env.value(SlackSettings, "signing_secret")
    )
    base_url = env.value(SlackSettings, "api_base_url")
    if not HTTP_URL.fullmatch(base_url):
        env.problems.append(f"SLACK_API_URL={base_url!r}: expected an http(s) URL")
    return env.section(
        SlackSettings,
        bot_token=bot_token,
        app_token=app_token,
        signing_secret=secret,
        api_base_url=base_url if base_url.endswith("/") else base_url + "/",
        mode="http" if mode == "http" else "socket",
        http_limits=env.section(HttpLimits),
        team_ids=_slack_ids(env, "team_ids", prefix="T"),
        enterprise_ids=_slack_ids(env, "enterprise_ids", prefix="E"),
    )


def _slack_ids(env: _EnvReader, field_name: str, *, prefix: str) -> frozenset[str]:
    """A comma (or space) list of Slack ids, each `prefix` then capitals and digits, as Slack shows them."""
    ids = _words(env.value(SlackSettings, field_name))
    wrong = sorted(i for i in ids if not re.fullmatch(rf"{prefix}[A-Z0-9_]{{1,31}}", i))
    if wrong:
        name = variable(SlackSettings, field_name).name
        env.problems.append(f"{name}: {', '.join(map(repr, wrong))} not like {prefix}0123ABCD (a Slack id)")
    return ids


def _read_cluster(env: _EnvReader) -> ClusterSettings:
    kubeconfig = env.value(ClusterSettings, "kubeconfig")
    in_cluster_default = not kubeconfig and bool(env.text("KUBERNETES_SERVICE_HOST"))
    namespace = env.value(ClusterSettings, "namespace")
    if not labels.is_dns1123_label(namespace):
        env.problems.append(f"GPUBOT_NAMESPACE={namespace!r}: not a valid namespace name")
    return env.section(
        ClusterSettings,
        kubeconfig=kubeconfig,
        namespace=namespace,
        in_cluster=env.value(ClusterSettings, "in_cluster", default=in_cluster_default),
        pod_security=_read_pod_security(env),
    )


def _read_pod_security(env: _EnvReader) -> models.PodSecurity:
    default = models.PodSecurity()
    non_root = env.flag("GPUBOT_RUN_AS_NON_ROOT", default.run_as_non_root)
    user = default.run_as_user
    if env.text("GPUBOT_RUN_AS_USER") in ("none", "image"):  # the image's own USER
        user = None
    elif env.text("GPUBOT_RUN_AS_USER"):
        user = env.integer("GPUBOT_RUN_AS_USER", 0, minimum=0, maximum=podsecurity.MAX_UID)
    if non_root and user == 0:  # the kubelet would refuse to start every workload
        env.problems.append("GPUBOT_RUN_AS_USER=0 contradicts GPUBOT_RUN_AS_NON_ROOT=true")
    return models.PodSecurity(
        run_as_non_root=non_root,
        run_as_user=user,
        read_only_root_filesystem=env.flag("GPUBOT_READ_ONLY_ROOT_FILESYSTEM"),
    )


def _read_reaper(env: _EnvReader) -> ReaperSettings:
    max_hours = env.value(ReaperSettings, "max_lease_hours")
    default_hours = env.value(ReaperSettings, "default_lease_hours")
    if default_hours > max_hours:
        env.problems.append(
            f"GPUBOT_DEFAULT_LEASE_HOURS={default_hours:g} exceeds GPUBOT_MAX_LEASE_HOURS={max_hours:g}"
        )
    metric = env.value(ReaperSettings, "gpu_metric")
    if metric not in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        env.problems.append(
            f"GPUBOT_GPU_METRIC={metric!r}: expected DCGM_FI_DEV_GPU_UTIL or DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        )
    total_default = max(ReaperSettings.max_total_lease_hours, max_hours)
    return env.section(
        ReaperSettings,
        default_lease_hours=default_hours,
        max_lease_hours=max_hours,
        max_total_lease_hours=env.value(
            ReaperSettings, "max_total_lease_hours", default=total_default, minimum=max_hours
        ),
        gpu_metric=metric,
    )


def _words(text: str) -> frozenset[str]:
    """A comma (or space) list, as GPUBOT_ADMINS and the Slack id variables take them."""
    return frozenset(word for word in re.split(r"[\s,]+", text) if word)


def _read_quota(env: _EnvReader) -> QuotaSettings:
    return env.section(QuotaSettings, admins=_words(env.value(QuotaSettings, "admins")))


def _read_leader(env: _EnvReader) -> LeaderSettings:
    name = env.value(LeaderSettings, "lease_name")
    if len(name) > 253 or not all(labels.is_dns1123_label(part) for part in name.split(".")):
        env.problems.append(f"GPUBOT_LEADER_LEASE={name!r}: not a valid Lease name (like gpubot-leader)")
    lease = env.value(LeaderSettings, "lease_duration_seconds")
    deadline = env.value(LeaderSettings, "renew_deadline_seconds")
    retry = env.value(LeaderSettings, "retry_period_seconds")
    timings = leadership.timing_problems(lease_duration=lease, renew_deadline=deadline, retry_period=retry)
    for problem in timings:
        env.problems.append(f"GPUBOT_LEADER_*_SECONDS: {problem}")
    return env.section(
        LeaderSettings,
        lease_name=name,
        identity=env.value(LeaderSettings, "identity") or default_identity(),
        lease_duration_seconds=lease,
        renew_deadline_seconds=deadline,
        retry_period_seconds=retry,
    )


ENDPOINTS = ("gke_endpoint", "eks_endpoint", "autoscaling_endpoint")


def _read_cloud(env: _EnvReader) -> CloudSettings:
    endpoints = {}
    for field_name in ENDPOINTS:
        endpoints[field_name] = url = env.value(CloudSettings, field_name).rstrip("/")
        if url and not HTTP_URL.fullmatch(url):
            name = variable(CloudSettings, field_name).name
            env.problems.append(f"{name}={redact_urls_in(url)!r}: expected an http(s) URL")
    return env.section(
        CloudSettings,
        **endpoints,
        aws_region=env.value(CloudSettings, "aws_region") or env.text("AWS_DEFAULT_REGION"),
        **_read_cloud_target(env),
    )


def _read_cloud_target(env: _EnvReader) -> dict[str, str]:
    provider = env.value(CloudSettings, "provider").lower()
    found = {
        "provider": provider,
        "cluster_name": env.value(CloudSettings, "cluster_name"),
        "project": env.value(CloudSettings, "project"),
        "location": env.value(CloudSettings, "location"),
    }
    if provider not in ("", "gke", "eks"):
        env.problems.append(f"GPUBOT_CLOUD={provider!r}: expected gke or eks (or unset)")
    elif provider and not found["cluster_name"]:
        env.problems.append(f"GPUBOT_CLOUD={provider} needs GPUBOT_CLOUD_CLUSTER, the cluster's name there")
    elif provider == "gke" and not (found["project"] and found["location"]):
        env.problems.append("GPUBOT_CLOUD=gke needs GPUBOT_GKE_PROJECT and GPUBOT_GKE_LOCATION")
    return found


def _read_warm(env: _EnvReader) -> WarmSettings:
    schedules = []
    for line in re.split(r"[;\n]", env.value(WarmSettings, "schedules")):
        if not line.strip() or line.strip().startswith("#"):
            continue
        parsed = warm.parse(line)
        if isinstance(parsed, models.UsageError):
            env.problems.append(f"GPUBOT_WARM_SCHEDULES: {parsed.problem} (e.g. {warm.EXAMPLE})")
        else:
            schedules.append(parsed)
    configmap = env.value(WarmSettings, "configmap")
    if not labels.is_dns1123_label(configmap):
        env.problems.append(f"GPUBOT_WARM_CONFIGMAP={configmap!r}: not a valid ConfigMap name")
    if schedules and not env.value(CloudSettings, "provider"):
        env.problems.append("GPUBOT_WARM_SCHEDULES needs GPUBOT_CLOUD (gke or eks) to resize the pools")
    return WarmSettings(schedules=tuple(schedules), configmap=configmap)


@dataclass(frozen=True)
class ToolSettings:
    """What operator commands such as `gpubot pool` read: no Slack, since they run from a laptop."""

    cloud: CloudSettings
    profiles: ProfileSettings
    cluster: ClusterSettings
    redis: RedisSettings = RedisSettings()
    """`gpubot doctor` reads the scale-up times the bot keeps there."""
    leader: LeaderSettings = LeaderSettings(identity="")
    """`gpubot doctor` probes the Lease by this name: the chart grants get and update on that name only."""
    warm: WarmSettings = WarmSettings()
    """`gpubot doctor` probes the warm schedules' ConfigMap by this name, granted the same way."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ToolSettings:
        return _read_environment(environ, _read_tools)


def _read_environment(environ: Mapping[str, str] | None, read: Callable[[_EnvReader], T]) -> T:
    """`read` over `environ` (default: the process environment); SettingsError naming every problem found."""
    reader = _EnvReader(os.environ if environ is None else environ)
    found = read(reader)
    if reader.problems:
        raise SettingsError("invalid configuration:\n  " + "\n  ".join(reader.problems), reader.problems)
    return found


def _read_tools(env: _EnvReader) -> ToolSettings:
    return ToolSettings(
        cloud=_read_cloud(env),
        profiles=env.section(ProfileSettings),
        cluster=_read_cluster(env),
        redis=env.section(RedisSettings),
        leader=_read_leader(env),
        warm=_read_warm(env),
    )


def _read_settings(env: _EnvReader) -> Settings:
    log_level = env.value(Settings, "log_level").upper()
    if log_level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        env.problems.append(f"LOG_LEVEL={log_level!r}: expected DEBUG, INFO, WARNING, ERROR or CRITICAL")
    log_format = env.text("GPUBOT_LOG_FORMAT", "json").lower()
    if log_format not in ("json", "text"):
        env.problems.append(f"GPUBOT_LOG_FORMAT={log_format!r}: expected json or text")
    slack = _read_slack(env)
    health_port = env.value(Settings, "health_port")
    if slack.mode == "http" and health_port == slack.http_port:
        env.problems.append(f"GPUBOT_HEALTH_PORT={health_port} is Slack's HTTP port too (PORT); pick another")
    return Settings(
        slack=slack,
        cluster=_read_cluster(env),
        redis=env.section(RedisSettings),
        reaper=_read_reaper(env),
        quota=_read_quota(env),
        profiles=env.section(ProfileSettings),
        leader=_read_leader(env),
        cloud=_read_cloud(env),
        warm=_read_warm(env),
        log_level=log_level,
        log_json=log_format == "json",
        health_port=health_port,
    )
