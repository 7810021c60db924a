"""The domain vocabulary shared by handlers, services and adapters: frozen dataclasses, no effects.

Everything that crosses a zone boundary is one of these, never a vendor object, so the core can be
tested without Slack or Kubernetes and adapters can be swapped without touching decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from bot.core import labels

GIB = 1024**3


@dataclass(frozen=True)
class Toleration:
    """One Kubernetes toleration, named exactly as the Pod API names its fields (`key`, never `important`)."""

    key: str
    operator: str = "Equal"
    """`Equal` (needs `value`) or `Exists` (must not have one)."""
    value: str = ""
    effect: str = ""
    """`NoSchedule`, `PreferNoSchedule`, `NoExecute`, or empty for all effects."""
    toleration_seconds: int | None = None
    """Only meaningful with `NoExecute`: how long the pod stays after the taint appears."""


@dataclass(frozen=True)
class ProfileSecurity:
    """A profile's departures from the bot-wide PodSecurity; None keeps the bot-wide value."""

    run_as_root: bool = False
    """The profile's images must run as root (e.g. CUDA images that install packages at start): no
    runAsNonRoot and no runAsUser, so the image's own user runs. Pod Security "restricted" refuses such a
    pod; its namespace must enforce "baseline" at most."""
    run_as_user: int | None = None
    """A uid other than the bot-wide one (the image's own non-root user, e.g. 1001)."""
    read_only_root_filesystem: bool | None = None


@dataclass(frozen=True)
class GpuProfile:
    """A kind of GPU a user may ask for with `--type`, and how a pod lands on it."""

    name: str
    resource_name: str = labels.GPU_RESOURCE
    max_count: int = 1
    """GPUs one pod may ask for; no more than one node of the pool has."""
    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    """Pairs rather than a dict so the profile stays hashable; see `node_selector_map`."""
    default_cpu_millis: int = 2000
    default_memory_bytes: int = 8 * GIB
    price_per_hour: float = 0.0
    """US dollars per node-hour (GPU plus host machine), for cost lines in status and episodes."""
    accelerator: str = ""
    """The cloud's accelerator name (e.g. `nvidia-tesla-t4`), for display."""
    description: str = ""
    security: ProfileSecurity = ProfileSecurity()
    """How this profile's pods depart from the bot-wide securityContext (images that must run as root)."""
    image: str = ""
    """The image a run of this profile gets when none is typed (a notebook profile's Jupyter image)."""
    ports: tuple[int, ...] = ()
    """Ports a run of this profile exposes when it names none (`--port`), e.g. Jupyter's 8888."""
    activity: str = ""
    """Where its runs show activity besides the GPU (`notebooks.JUPYTER`: its Jupyter Server's kernels),
    which the idle reaper reads before calling a run idle; "" for the GPU alone."""
    queue: str = ""
    """The Kueue LocalQueue its runs are submitted to (the pod label `kueue.x-k8s.io/queue-name`); empty
    when Kueue does not manage its pods."""

    @property
    def node_selector_map(self) -> dict[str, str]:
        return dict(self.node_selector)


@dataclass(frozen=True)
class Owner:
    """The Slack user a workload belongs to."""

    user_id: str
    """Slack user id such as `U01ABC2DEF`; the identity used for ownership and quota."""
    user_name: str = ""
    team_id: str = ""


@dataclass(frozen=True)
class RunRequest:
    """`/gpu run`: what the user asked for; unset fields fall back to the profile's and policy's defaults."""

    image: str
    """As typed, made familiar (`pytorch/pytorch:…`); empty when `--type` names a profile with an image."""
    gpus: int = 1
    profile: str | None = None
    hours: float | None = None
    cpu_millis: int | None = None
    memory_bytes: int | None = None
    name: str | None = None
    ports: tuple[int, ...] = ()
    """Container ports to reach once it runs (`--port`); the thread's Connect section forwards each."""
    command: tuple[str, ...] = ()
    """Container args after `--`, passed as a list: never through a shell."""
    text: str = ""
    """The original command text, as typed after `/gpu`."""


@dataclass(frozen=True)
class StatusRequest:
    """`/gpu status [all]`: the caller's workloads, or everyone's with `all`."""

    everyone: bool = False


@dataclass(frozen=True)
class UsageRequest:
    """`/gpu usage [week|month] [@user]`: spend this period, the caller's, one user's, or everyone's."""

    period: str = "week"
    """`week` (this ISO week, from Monday 00:00 UTC) or `month` (from the 1st, UTC)."""
    user_id: str = ""
    """Set when the user was named by a Slack mention (`<@U123|alice>`) or by id."""
    user_name: str = ""
    """Set when the user was named as typed (`@alice`): Slack sends names unescaped to this command."""

    @property
    def named(self) -> bool:
        return bool(self.user_id or self.user_name)


@dataclass(frozen=True)
class ReleaseRequest:
    """`/gpu release [NAME|all]`: no name means "my only workload"; the service asks if there are several."""

    name: str | None = None
    everything: bool = False


@dataclass(frozen=True)
class ExtendRequest:
    """`/gpu extend [NAME] [HOURS]`: push a lease end further; no hours means the default lease."""

    name: str | None = None
    hours: float | None = None


@dataclass(frozen=True)
class LogsRequest:
    """`/gpu logs [NAME] [--tail N]`: a workload's output, the last `tail` lines."""

    name: str | None = None
    tail: int = 50


@dataclass(frozen=True)
class HelpRequest:
    """`/gpu help [COMMAND]`."""

    topic: str | None = None


@dataclass(frozen=True)
class DoctorRequest:
    """`/gpu doctor`: the pre-flight checks of `gpubot doctor`, for admins, in Slack."""


@dataclass(frozen=True)
class WarmSchedule:
    """Keep `min_nodes` of `pool` up on `days` from `start` to `end`, in the IANA time zone `zone`."""

    pool: str
    min_nodes: int
    days: tuple[str, ...]
    """Three-letter day names, Monday first, as APScheduler's cron `day_of_week` takes them."""
    start: time
    end: time
    zone: str

    @property
    def cron_days(self) -> str:
        return ",".join(self.days)

    @property
    def text(self) -> str:
        """The schedule as it is typed, so a stored one reads back the same."""
        hours = f"{self.start:%H:%M}-{self.end:%H:%M}"
        return f"{self.pool} min {self.min_nodes} {self.cron_days} {hours} {self.zone}"


@dataclass(frozen=True)
class WarmRequest:
    """`/gpu warm [SCHEDULE | remove N]`: list the pre-warm schedules, or (admins) add or remove one."""

    add: WarmSchedule | None = None
    remove: int | None = None
    """1-based, as `/gpu warm` numbers them."""


GpuCommand = (
    RunRequest
    | StatusRequest
    | UsageRequest
    | ReleaseRequest
    | ExtendRequest
    | LogsRequest
    | HelpRequest
    | DoctorRequest
    | WarmRequest
)


@dataclass(frozen=True)
class UsageError:
    """A refused command: what is wrong, and a command the user can type instead."""

    problem: str
    suggestion: str

    @property
    def message(self) -> str:
        return f"{self.problem}\nTry: `{self.suggestion}`"

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class QuotaPolicy:
    """Per-user limits and who the admins are, from configuration."""

    max_gpus_per_user: int = 2
    default_lease_hours: float = 4.0
    max_lease_hours: float = 24.0
    admins: frozenset[str] = frozenset()
    """Slack user ids allowed to release anyone's workload."""

    def is_admin(self, user_id: str) -> bool:
        return user_id in self.admins


DEFAULT_RUN_AS_USER = 1000
"""The uid workloads run as unless a profile says otherwise: not 0, so Pod Security "restricted" admits
the pod, and the first non-system uid of Debian and Ubuntu images (often the one their files belong to)."""


@dataclass(frozen=True)
class PodSecurity:
    """The pod and container securityContext gpubot applies to every workload, unless its profile differs."""

    run_as_non_root: bool = True
    """On by default, as Pod Security "restricted" requires; a profile whose images need root says so."""
    run_as_user: int | None = DEFAULT_RUN_AS_USER
    """Set, so an image whose USER is root still starts (the kubelet refuses runAsNonRoot with uid 0)."""
    read_only_root_filesystem: bool = False
    automount_service_account_token: bool = False
    service_account_name: str | None = None
    priority_class_name: str | None = None
    image_pull_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditEntry:
    """One who/what/when record, kept in the pod's audit annotation and logged as a structured line."""

    action: str
    actor: str
    at: datetime
    detail: tuple[tuple[str, str], ...] = ()
    """Extra facts as pairs (image, gpus, name, …), kept in order."""
