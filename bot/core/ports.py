"""Core: the ports services talk through; adapters implement them, tests swap in fakes or run them on the sim.

Ports speak core models and plain dicts only, and raise only `bot.core.errors`, so no vendor type or
exception crosses into services or the core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal, Protocol

from bot.core import (
    doctor_facts,
    idleness,
    lifecycle,
    notebooks,
    notices,
    operations,
    pools,
    runform,
    workloads,
)

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
"""The change kinds an informer callback receives, named as the watch API names them."""

WatchCallback = Callable[[str, Mapping[str, Any]], None]
"""`(change, object)`: the change is ADDED, MODIFIED or DELETED; the object is the API's JSON as a dict."""


class Cluster(Protocol):
    """gpubot's view of Kubernetes: its pods in one namespace, the nodes, and one informer per kind."""

    def create_pod(self, manifest: Mapping[str, Any]) -> workloads.Workload:
        """Create the pod; `Conflict` if one with that name exists, `Invalid` if the API refuses it."""
        ...

    def delete_pod(self, namespace: str, name: str, *, uid: str = "", resource_version: str = "") -> None:
        """Start a graceful deletion; `NotFound` if there is no such pod, `Conflict` if `uid` is given
        and the pod of that name is another (made since, by anyone), or if `resource_version` is given and
        the pod changed since (the delete was decided on a state that is no more)."""
        ...

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str], *, resource_version: str = ""
    ) -> str:
        """Merge `annotations` into the pod's (other keys stay); `NotFound` if it is gone. Returns the
        pod's resourceVersion after the write, for a next step guarded by it.

        With `resource_version`, `Conflict` if the pod changed since that version: a read-modify-write of
        one annotation then never overwrites a concurrent writer's value.
        """
        ...

    def read_log(self, namespace: str, name: str, *, tail_lines: int, previous: bool = False) -> str:
        """The pod's output, its last `tail_lines` lines (fewer, still the newest, where those would pass the
        adapter's byte cap); with `previous`, the last instance's before a restart. Raises Invalid while the
        container has not started (the API server's words say why)."""
        ...

    def list_workloads(self, owner: str | None = None) -> list[workloads.Workload]:
        """gpubot's pods, optionally only one Slack user's, sorted by name."""
        ...

    def get_workload(self, namespace: str, name: str) -> workloads.Workload | None:
        """One pod if it exists and gpubot manages it, else None."""
        ...

    def list_nodes(self) -> list[lifecycle.NodeSeen]:
        """Every node as it is now: name, pool, Ready, allocatable GPUs."""
        ...

    def list_pods_on_nodes(self, nodes: Iterable[str]) -> Sequence[Mapping[str, Any]]:
        """Every pod bound to these nodes, in any namespace and gpubot's or not, as the API sent them."""
        ...

    def read_autoscaler_status(self) -> str | None:
        """The Cluster Autoscaler's status ConfigMap text, or None where it publishes none."""
        ...

    def start_informers(
        self, *, on_pod: WatchCallback, on_event: WatchCallback, on_node: WatchCallback
    ) -> None:
        """Start one list+watch per kind on its own thread; each callback first sees the initial list."""
        ...

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every informer delivered its initial list; False if `timeout` seconds passed first."""
        ...

    def stop(self) -> None:
        """Stop the informers and wait for their threads; callbacks are not called after this returns."""
        ...


@dataclass(frozen=True)
class StoredConfig:
    """A ConfigMap's data as read, with the resourceVersion a replace must name."""

    data: Mapping[str, str]
    version: str


class ConfigStore(Protocol):
    """A ConfigMap of gpubot's own, in its namespace: settings an admin changes from Slack."""

    def read_config(self, name: str) -> StoredConfig | None:
        """None when it does not exist yet."""
        ...

    def write_config(self, name: str, data: Mapping[str, str], *, version: str | None) -> None:
        """Create (`version` None) or replace what was read at `version`; `errors.Conflict` when someone
        wrote it since, or created it first."""
        ...


class Store(Protocol):
    """What gpubot keeps outside Kubernetes: only what can be rebuilt, or is an optimisation.

    Every method fails open (a Redis outage must not stop the bot): `claim` then says True and
    `samples` says nothing, so the worst case is a duplicate message or a missing ETA, never a lost workload.
    """

    def claim(self, key: str, ttl_seconds: int) -> bool:
        """True for the first caller of `key` within `ttl_seconds`, on any replica; False for repeats."""
        ...

    def add_sample(self, series: str, value: float, *, keep: int) -> None:
        """Append a measurement, keeping only the newest `keep`."""
        ...

    def samples(self, series: str) -> list[float]:
        """A series' measurements, newest first."""
        ...

    def remember(self, key: str, value: str, ttl_seconds: int) -> None:
        """Keep a small value for a while (e.g. which Slack message shows an episode)."""
        ...

    def recall(self, key: str) -> str | None:
        """A remembered value, or None if there is none (or the store is down)."""
        ...

    def add_amounts(self, table: str, amounts: Mapping[str, float], ttl_seconds: int) -> None:
        """Add to running totals kept by field in `table` (e.g. one day's spend per user and channel), the
        table kept `ttl_seconds` from this write."""
        ...

    def amounts(self, table: str) -> dict[str, float] | None:
        """A table's running totals; {} when there are none, None when the store cannot say (it is down)."""
        ...

    def put(self, table: str, key: str, value: str) -> bool:
        """Keep `value` under `key` in `table` until dropped (e.g. requests accepted, pods not made yet).
        False when it could not be kept (the store is down): a caller whose promise rests on it says so."""
        ...

    def drop(self, table: str, key: str) -> None: ...

    def entries(self, table: str) -> dict[str, str]:
        """Everything kept in `table`; {} when there is nothing (or the store is down)."""
        ...


Ticketed = tuple[int, str]
"""A reservation as kept: the ticket the store gave it (its place in line) and its value."""


class Reservations(Protocol):
    """Runs between their quota check and their pod, shared by every replica: what makes quota atomic.

    `reserve` is one atomic step in the store (a Redis script), so each run sees exactly the runs that
    reserved before it. With the store down a replica keeps its own (and says so in its log): the quota then
    holds per replica only, and a release on another replica cannot cancel a run still starting here.
    """

    def reserve(self, key: str, value: str) -> tuple[int, dict[str, Ticketed]]:
        """Keep `value` under `key` with the next ticket; that ticket, and every reservation held at that
        moment (this one included), in one atomic step."""
        ...

    def amend(self, key: str, value: str) -> bool:
        """Replace a held reservation's value, keeping its ticket; False if it is not held (any more)."""
        ...

    def held(self) -> dict[str, Ticketed]:
        """Every reservation held now."""
        ...

    def cancel(self, key: str, by: str) -> bool:
        """Mark a held reservation's run cancelled by `by`; False if it is not held (any more)."""
        ...

    def cancelled_by(self, key: str) -> str:
        """Who cancelled the run, or "" if nobody did."""
        ...

    def release(self, key: str) -> None:
        """Forget the reservation and its cancel mark: its pod exists, or it will never."""
        ...


class GpuMetrics(Protocol):
    """Per-pod GPU utilisation from a metrics store (Prometheus with the DCGM exporter)."""

    def gpu_utilisation(
        self, namespace: str, pods: Sequence[str], *, window: timedelta, at: datetime
    ) -> dict[str, idleness.Utilisation]:
        """Each pod's utilisation over `window` ending `at`; pods without samples are absent.

        `Unavailable` when the store cannot answer: the caller then knows nothing (so: busy).
        """
        ...


class NotebookActivity(Protocol):
    """What a notebook's Jupyter Server says of its kernels, read through the API server's pod proxy."""

    def jupyter_activity(self, namespace: str, name: str, *, port: int, token: str) -> notebooks.Reading:
        """Its activity, or `Unread` saying why not (unreachable, the token refused, an odd answer): a
        notebook that cannot be read is a normal case the reaper words, not an error."""
        ...


CommandOutcome = Literal["ok", "refused", "failed"]
"""How a command ended: done, refused by policy (quota, profile; the user was told why), or failed."""


class Telemetry(Protocol):
    """What services count for the operator's dashboards; the adapter keeps it as Prometheus metrics."""

    def count_command(self, command: str, outcome: CommandOutcome) -> None: ...

    def observe_time_to_running(self, seconds: float) -> None:
        """From the pod's creation to its container Running, in the cluster's time."""
        ...

    def count_scale_up(self, pool: str) -> None:
        """A workload's pod triggered a Cluster Autoscaler scale-up of `pool`."""
        ...

    def count_reaper_act(self, act: str, *, dry_run: bool) -> None:
        """The reaper reminded, warned, or deleted (`reaping.Act` values)."""
        ...

    def count_undelivered(self, act: str, *, where: str, why: str) -> None:
        """A reaper message its thread (`where="thread"`) or the owner's DM refused for good."""
        ...


class NoTelemetry:
    """Counts nothing: the default, so services and their tests need no metrics registry."""

    def count_command(self, command: str, outcome: CommandOutcome) -> None:
        return None

    def observe_time_to_running(self, seconds: float) -> None:
        return None

    def count_scale_up(self, pool: str) -> None:
        return None

    def count_reaper_act(self, act: str, *, dry_run: bool) -> None:
        return None

    def count_undelivered(self, act: str, *, where: str, why: str) -> None:
        return None


NO_TELEMETRY: Final = NoTelemetry()


class PoolManager(Protocol):
    """One cluster's GPU node pools at its cloud (GKE node pools, EKS nodegroups with their ASG tags).

    Mutations wait until the cloud says they are done, so a caller can show the result at once; `watch`
    hears of each look at a change still under way. A wait that outlasts the settings' timeout raises
    `StillRunning`, a change the cloud gave up on `OperationFailed`.
    """

    def create_pool(self, spec: pools.PoolSpec, *, watch: operations.Watch | None = None) -> pools.PoolView:
        """Create the pool as specified; `Conflict` if one of that name exists, `Invalid` if refused."""
        ...

    def get_pool(self, name: str) -> pools.PoolView:
        """The pool as the cloud reports it; `NotFound` if there is none of that name."""
        ...

    def list_pools(self) -> Sequence[pools.PoolView]:
        """Every node pool of the cluster, GPU or not; `Unavailable` if the cloud cannot be asked."""
        ...

    def set_pool_size(
        self, name: str, resize: pools.Resize, *, watch: operations.Watch | None = None
    ) -> pools.PoolView:
        """Turn autoscaling on within these bounds (moving the current size when asked); `NotFound`."""
        ...

    def delete_pool(self, name: str, *, watch: operations.Watch | None = None) -> None:
        """Delete the pool and its nodes; `NotFound` if there is none of that name."""
        ...


class ClusterProbe(Protocol):
    """What `gpubot doctor` reads beyond the bot's daily view; a port of its own so `Cluster` stays small."""

    def list_node_objects(self) -> Sequence[Mapping[str, Any]]:
        """Every node as the API sent it, taints and allocatable included."""
        ...

    def read_autoscaler_configmap(self) -> doctor_facts.AutoscalerFacts:
        """The status ConfigMap's text and last update, with the API server's clock; text None if absent."""
        ...

    def review_access(self, rule: doctor_facts.AccessRule) -> doctor_facts.AccessAnswer:
        """Whether the credentials in use may do this, by the API server's SelfSubjectAccessReview."""
        ...


Answer = Callable[[str], bool]
"""Answers the person who typed a command, privately, by the command's own response_url: that reaches them
even in a channel the bot is not in, where an ephemeral through the Web API is refused. True if sent."""


class Chat(Protocol):
    """How services speak to people, in core notices; the composition root renders them.

    Any chat (the Slack outbox, a test fake) can stand behind it. The three that wait (`post`, `post_dm`,
    `upload`) raise `errors.Unreachable` when the destination refuses us for good (the bot not in the
    channel, the channel archived or gone), so a caller can reach the person another way.
    """

    def post(
        self,
        channel: str,
        notice: notices.Notice,
        *,
        thread_ts: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Post and wait until it is delivered; return its ts (a thread root's ts is the thread's id).
        Not sent within `timeout` seconds (the chat's default when None): `Unavailable`, and withdrawn."""
        ...

    def reply(self, channel: str, thread_ts: str, notice: notices.Notice) -> None:
        """Queue a reply in a thread, in order after earlier writes to that channel."""
        ...

    def update(self, channel: str, ts: str, notice: notices.Notice) -> None:
        """Queue an edit of a message; unsent earlier edits of it are superseded."""
        ...

    def ephemeral(self, channel: str, user: str, notice: notices.Notice) -> None:
        """Queue a message only `user` sees; with no channel (a press on the App Home, which has none) it
        goes to their DM."""
        ...

    def publish_home(self, user: str, home: notices.Home) -> None:
        """Queue `user`'s App Home tab; only the latest queued one is sent."""
        ...

    def dm(self, user: str, notice: notices.Notice) -> None:
        """Queue a direct message to `user` (the conversation is opened as needed)."""
        ...

    def post_dm(self, user: str, notice: notices.Notice, *, timeout: float | None = None) -> str:
        """A direct message to `user`, waited for as `post` waits."""
        ...

    def open_form(self, trigger_id: str, form: runform.RunForm) -> None:
        """Open the run form for whoever just asked (their `trigger_id`), at once: never queued, since a
        trigger lasts seconds. Raises the chat's refusal (`Invalid` for an expired trigger)."""
        ...

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        """Share `content` as a text file named `filename` in a direct message to `user`, introduced by
        `comment` (plain text); waited for as `post` waits, and returns the file's id. Slack refusing it for
        good raises that refusal (`Invalid`, `Unreachable`…); not sent within `timeout`: `Unavailable`."""
        ...
