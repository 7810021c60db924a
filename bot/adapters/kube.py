"""Adapter: the `Cluster` port over the official sync `kubernetes` client, and gpubot's three informers.

Everything the client raises is turned into `bot.core.errors` here, and every object leaves as the plain
JSON dict the API server sent: list and watch responses are read raw (`_preload_content=False`), so the
client's models never validate, drop or reshape what the cluster says. Only request bodies go through the
models, because the v37 client validates them locally before sending.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pydantic
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from bot.adapters import kube_retry
from bot.core import (
    autoscaler_status,
    backoff,
    doctor_facts,
    errors,
    labels,
    lifecycle,
    ports,
    workloads,
)
from bot.settings import ClusterSettings

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
AUTOSCALER_STATUS = ("kube-system", "cluster-autoscaler-status")
"""Where the Cluster Autoscaler publishes its status (`--status-config-map-name`), and the key it uses."""
AUTOSCALER_STATUS_KEY = "status"
AUTOSCALER_LAST_UPDATED = "cluster-autoscaler.kubernetes.io/last-updated"
LIST_PAGE = 500
"""Objects per list page: large event lists arrive in chunks instead of one huge response."""
MERGE_PATCH = "application/merge-patch+json"
"""RFC 7386, named explicitly: the v37 client would otherwise label a dict body as a JSON Patch."""


@dataclass(frozen=True)
class InformerSettings:
    watch_timeout_seconds: int = 300
    """Server-side watch length; the informer then resumes from the last resourceVersion it saw."""
    read_grace_seconds: float = 30.0
    """Extra socket read time past the watch timeout before a silent connection counts as dead."""
    connect_timeout_seconds: float = 10.0
    list_timeout_seconds: float = 30.0
    """Read timeout of one list page: a list the server holds longer is lost and retried."""
    backoff_initial_seconds: float = 0.5
    """First pause after a connection or server error; doubles per consecutive failure, and starts over
    once a request succeeds, so a watch cut after streaming for a while resumes within this pause."""
    backoff_max_seconds: float = 30.0
    join_timeout_seconds: float = 5.0
    """How long `stop()` waits for each informer thread."""


LOG_LIMIT_BYTES = 1024 * 1024
"""The most of a pod's output read at once: past this, `kubectl logs` is the tool."""
LOG_READS = 4
"""Reads of one log at most, each asking fewer lines, until the answer fits in LOG_LIMIT_BYTES whole."""


# -- errors ------------------------------------------------------------------------------------------


def error_body(err: ApiException) -> Obj:
    """A failure's body as JSON (a Status when the API server wrote it), or {} when it is no JSON object."""
    try:
        body = json.loads(err.body) if err.body else {}
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def convert(err: ApiException) -> errors.GpubotError:
    """Map an API failure onto the taxonomy by status code (kopf's `check_response`, for this client)."""
    status = int(err.status or 0)
    message = str(error_body(err).get("message") or err.reason or f"HTTP {err.status}")  # the API's own words
    if status == 404:
        return errors.NotFound(message)
    if status == 409:
        return errors.Conflict(message)
    if status == 410:
        return errors.Gone(message)
    if status == 429:
        return errors.RateLimited(message, retry_after=backoff.retry_after(err.headers))
    if status >= 500 or status == 0:
        return errors.Unavailable(message)
    if status == 403:
        return errors.Forbidden(message)
    return errors.Invalid(message)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Run client calls with vendor exceptions converted at this edge."""
    try:
        yield
    except ApiException as err:
        raise convert(err) from err
    except pydantic.ValidationError as err:
        raise errors.Invalid(f"rejected by the client before sending: {err}") from err
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise errors.Unavailable(unreachable_text(err)) from err


def unreachable_text(err: BaseException) -> str:
    """A transport failure as a person can read it: what happened, not the API server's internal address
    (the full error stays chained for the logs)."""
    if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None:
        err = err.reason
    if isinstance(err, (urllib3.exceptions.NewConnectionError, ConnectionRefusedError)):
        return "the Kubernetes API refused the connection"
    if isinstance(err, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return "the Kubernetes API did not answer in time"
    if isinstance(err, urllib3.exceptions.ProtocolError):
        return "the connection to the Kubernetes API broke off"
    return "the Kubernetes API could not be reached"


def server_time(headers: Mapping[str, str] | None) -> datetime | None:
    """The API server's clock from a response's Date header, to judge what it says without local skew."""
    try:
        found = email.utils.parsedate_to_datetime((headers or {}).get("Date", ""))
    except (TypeError, ValueError):
        return None
    return found if found.tzinfo is not None else None


def read_json(response: Any) -> Obj:
    """A raw urllib3 response (from `_preload_content=False`) as the dict the server sent."""
    try:
        data: Obj = json.loads(response.data)
    finally:
        response.release_conn()
    return data


def send(timeout: float | tuple[float, float], request: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
    """One raw call of a generated client method within `timeout` (the client's `_request_timeout`), its
    answer as the JSON the server sent, vendor errors translated."""
    with translated():
        return read_json(request(*args, _preload_content=False, _request_timeout=timeout, **kwargs))


def dropped_fields(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Paths present in `sent` but lost in `kept`: fields the client's models silently ignore."""
    if isinstance(sent, Mapping) and isinstance(kept, Mapping):
        out: list[str] = []
        for key, value in sent.items():
            where = f"{path}.{key}" if path else str(key)
            out += dropped_fields(value, kept[key], where) if key in kept else [where]
        return out
    if isinstance(sent, list) and isinstance(kept, list):
        return [
            p
            for i, (a, b) in enumerate(zip(sent, kept, strict=False))
            for p in dropped_fields(a, b, f"{path}[{i}]")
        ]
    return []


def pod_body(api: client.ApiClient, manifest: Mapping[str, Any]) -> client.V1Pod:
    """The manifest as the client's model, refusing any field the model would drop on the way out."""
    with translated():
        body = client.V1Pod.from_dict(dict(manifest))
    if body is None:
        raise errors.Invalid("empty pod manifest")
    lost = dropped_fields(manifest, api.sanitize_for_serialization(body))  # type: ignore[no-untyped-call]
    if lost:
        raise errors.Invalid(f"fields unknown to the v1 Pod schema: {', '.join(lost)}")
    return body


# -- informers ---------------------------------------------------------------------------------------


def object_key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def pages(fetch: Callable[[str | None], Obj]) -> list[Obj]:
    """Every page of a list read LIST_PAGE objects at a time: `fetch(token)` reads the page after the
    one whose `continue` token it is given (None: the first)."""
    found = [fetch(None)]
    while token := (found[-1].get("metadata") or {}).get("continue"):
        found.append(fetch(token))
    return found


def _version_order(obj: Mapping[str, Any]) -> tuple[int, str]:
    """Oldest change first when versions are numbers (etcd's are), so a replay keeps roughly causal order."""
    version = resource_version(obj)
    return (len(version), version) if version.isdigit() else (0, "")


def replay(cache: Mapping[str, Obj], listed: list[Obj]) -> list[tuple[str, Obj]]:
    """The changes that turn `cache` into `listed`: how a relist after a 410 loses nothing.

    Objects that vanished while we were not watching are DELETED with their last known state; then new
    objects are ADDED and changed ones MODIFIED, oldest change first. Unchanged objects are not repeated.
    """
    current = {object_key(obj): obj for obj in sorted(listed, key=_version_order)}
    changes = [(ports.DELETED, obj) for key, obj in cache.items() if key not in current]
    for key, obj in current.items():
        before = cache.get(key)
        if before is not None and uid(before) != uid(obj):
            changes.append((ports.DELETED, before))  # deleted and recreated under the same name
            before = None
        if before is None:
            changes.append((ports.ADDED, obj))
        elif resource_version(before) != resource_version(obj):
            changes.append((ports.MODIFIED, obj))
    return changes


def whole(obj: Obj) -> Obj:
    """What an informer keeps of an object whose last state its DELETED callback needs: all of it but
    `managedFields` (the server's field bookkeeping, often a third of a real object, read by nobody here)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        return {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    return obj


def identity(obj: Obj) -> Obj:
    """What an informer keeps of an object whose listeners ignore its deletion (events): just enough for a
    relist to tell new, changed and vanished objects apart, a few hundred bytes instead of a whole event."""
    metadata = obj.get("metadata") or {}
    kept = {k: metadata[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in metadata}
    return {"kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", ""), "metadata": kept}


def stored_config(obj: Mapping[str, Any]) -> ports.StoredConfig:
    data = obj.get("data") or {}
    return ports.StoredConfig(data={str(k): str(v) for k, v in data.items()}, version=resource_version(obj))


class WatchEnded(Exception):
    """The server ended a watch with an ERROR event that is not a 410."""


@dataclass(frozen=True)
class Source:
    """What one informer lists and watches: a `list_*` method of CoreV1Api and its fixed arguments."""

    kind: str
    list_fn: Callable[..., Any]
    args: tuple[str, ...] = ()
    label_selector: str | None = None
    field_selector: str | None = None
    keep: Callable[[Obj], Obj] = whole
    """What the informer's cache holds of each object (see `whole` and `identity`)."""
    api_version: str = "v1"
    """Given to list items that lack it (a custom resource's group/version)."""


class Informer:
    """One list+watch of one kind on its own daemon thread, resuming and relisting as needed.

    The callback runs on this informer's thread, in the order the server sent changes.
    """

    def __init__(self, source: Source, callback: ports.WatchCallback, settings: InformerSettings) -> None:
        self.source = source
        self.callback = callback
        self.settings = settings
        self.synced = threading.Event()
        """Set once the initial list has been delivered."""
        self.cache: dict[str, Obj] = {}
        self.relists = 0
        """Lists after the first: each follows a 410 (the history the watch needed was gone)."""
        self.version: str | None = None
        """The last resourceVersion delivered, kept per event: a watch cut mid-stream resumes after it,
        so nothing it already delivered comes twice. None until listed, and after a 410."""
        self._failures = 0
        """Failed requests in a row; any request that gets an answer sets it back to 0."""
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"gpubot-informer-{source.kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._response is not None:
                shut_stream(self._response)

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self.version is None:
                    self.version = self._relist()
                self._watch(self.version)
            except errors.Gone:
                logger.info("%s watch expired; relisting", self.source.kind)
                self.version = None
            except Exception as err:
                if self._stopping.is_set():
                    break
                self._failures += 1
                initial, maximum = self.settings.backoff_initial_seconds, self.settings.backoff_max_seconds
                delay = kube_retry.delay(initial, maximum, self._failures, err)
                logger.warning("%s watch failed (%s); retrying in %.1fs", self.source.kind, err, delay)
                self._stopping.wait(delay)
        logger.debug("%s informer stopped", self.source.kind)

    def _call(self, **kwargs: Any) -> Any:
        """One raw request, registered so that `stop()` can shut its socket from another thread."""
        with translated():
            response = self.source.list_fn(
                *self.source.args,
                label_selector=self.source.label_selector,
                field_selector=self.source.field_selector,
                _preload_content=False,
                **kwargs,
            )
        with self._lock:
            self._response = response
            self._failures = 0
            if self._stopping.is_set():
                shut_stream(response)
        return response

    def _release(self, response: Any) -> None:
        with self._lock:
            self._response = None
        response.release_conn()

    def _list_page(self, token: str | None) -> Obj:
        timeout = (self.settings.connect_timeout_seconds, self.settings.list_timeout_seconds)
        response = self._call(limit=LIST_PAGE, _continue=token, _request_timeout=timeout)
        try:
            page: Obj = json.loads(response.data)
        finally:
            self._release(response)
        return page

    def _relist(self) -> str:
        """List everything (page by page), deliver what changed since the cache, and return the version."""
        listed = pages(self._list_page)
        items = [self._with_kind(item) for page in listed for item in page.get("items") or []]
        for change, obj in replay(self.cache, items):
            self._deliver(change, obj)
        if self.synced.is_set():
            self.relists += 1
        self.synced.set()
        return resource_version(listed[-1])

    def _with_kind(self, item: Obj) -> Obj:
        """List items may lack `kind`/`apiVersion` (the list carries them); watch objects never do."""
        item.setdefault("kind", self.source.kind)
        item.setdefault("apiVersion", self.source.api_version)
        return item

    def _watch(self, version: str) -> None:
        """Stream changes after `version` until the server ends the watch, keeping `self.version`.

        No BOOKMARK events are asked for: gpubot's selectors are small, so a relist after a 410 is cheap,
        and a server whose closing bookmark runs ahead of what it sent (the sim does) would make us skip
        changes."""
        timeout = self.settings.watch_timeout_seconds
        logger.debug("%s watch from resourceVersion %s", self.source.kind, version)
        response = self._call(
            watch=True,
            resource_version=version,
            timeout_seconds=timeout,
            _request_timeout=(
                self.settings.connect_timeout_seconds,
                timeout + self.settings.read_grace_seconds,
            ),
        )
        try:
            with translated():
                for line in _lines(response):
                    self.version = self._on_line(line) or self.version
        finally:
            self._release(response)

    def _on_line(self, line: str) -> str | None:
        event = json.loads(line)
        change, obj = str(event.get("type", "")), event.get("object") or {}
        if change == "ERROR":
            if obj.get("code") == 410:
                raise errors.Gone(str(obj.get("message", "")))
            raise WatchEnded(f"{obj.get('reason', '')}: {obj.get('message', '')}")
        if change != "BOOKMARK":
            self._deliver(change, obj)
        return resource_version(obj) or None

    def _deliver(self, change: str, obj: Obj) -> None:
        key = object_key(obj)
        if change == ports.DELETED:
            self.cache.pop(key, None)
        else:
            self.cache[key] = self.source.keep(obj)
        try:
            self.callback(change, obj)
        except Exception:
            logger.exception("%s callback failed on %s %s", self.source.kind, change, key)


def shut_stream(response: Any) -> None:
    """End a stream from another thread. One the server already closed (or that was released) has no socket
    left to shut: urllib3 then raises, and stopping must go on to the other informers regardless."""
    try:
        response.shutdown()
    except (OSError, RuntimeError, ValueError) as err:
        logger.debug("stream already closed (%s)", err)


def _lines(response: Any) -> Iterator[str]:
    """Newline-delimited JSON from a streaming response (one watch event per line)."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (
            text for text in (line.decode("utf-8", errors="replace").strip() for line in lines) if text
        )
    if buffer.strip():
        yield buffer.decode("utf-8", errors="replace").strip()


# -- the port ----------------------------------------------------------------------------------------


class KubeCluster:
    """`ports.Cluster` over one ApiClient, scoped to the namespace gpubot creates its pods in."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        informer_settings: InformerSettings | None = None,
        request_settings: kube_retry.RequestSettings | None = None,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self._pods_everywhere = True
        """Until the first 403: then pods are listed in the workload namespace only."""
        self.informer_settings = informer_settings or InformerSettings()
        self.requests = request_settings or kube_retry.RequestSettings()
        """Timeouts and retries of every call but the informers' (which resume on their own)."""
        self.informers: list[Informer] = []

    @classmethod
    def from_kubeconfig(
        cls, path: str | None, *, namespace: str, context: str | None = None, **options: Any
    ) -> KubeCluster:
        """From a kubeconfig file; None means the client's default (`$KUBECONFIG`, `~/.kube/config`)."""
        api = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=kube_retry.without_transport_retries()
        )
        return cls(api, namespace=namespace, **options)

    # -- calls -----------------------------------------------------------------------------------
    def read(self, what: str, request: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """A call that changes nothing, with the request timeout, retried as `kube_retry` does."""
        attempt = functools.partial(send, self.requests.timeout, request, *args, **kwargs)
        return kube_retry.call(self.requests, what, lambda _retried: attempt())

    def _find(self, what: str, request: Callable[..., Any], *args: Any) -> Obj | None:
        """`read`, or None when there is no such object (a 404)."""
        try:
            return self.read(what, request, *args)
        except errors.NotFound:
            return None

    def _read_pod(self, namespace: str, name: str) -> Obj | None:
        return self._find(f"reading pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def _write(self, what: str, landed: Callable[[], Obj | None], request: Callable[..., Any]) -> Obj:
        """A write, retried. Its answer may be lost while it lands (a timeout): a Conflict met by a retry
        is then checked with `landed`, which returns what an earlier attempt wrote, or None if none did."""

        def attempt(retried: bool) -> Obj:
            try:
                return send(self.requests.timeout, request)
            except errors.Conflict:
                found = landed() if retried else None
                if found is None:
                    raise
                return found

        return kube_retry.call(self.requests, what, attempt)

    # -- pods ----------------------------------------------------------------------------------
    def read_log(self, namespace: str, name: str, *, tail_lines: int, previous: bool = False) -> str:
        """The newest lines, at most `tail_lines` and LOG_LIMIT_BYTES. The kubelet applies `limitBytes`
        after `tailLines` (it seeks to the tail's first line, then stops writing at the limit), so an answer
        cut at the limit holds the *oldest* of the lines asked: it is asked again for fewer lines, as many
        as the cut answer held whole, less a tenth, until the answer ends at the pod's last line."""
        lines, data = tail_lines, b""
        for _ in range(LOG_READS):
            data = self._read_log(namespace, name, tail_lines=lines, previous=previous)
            whole = data.count(b"\n")
            if len(data) < LOG_LIMIT_BYTES or lines <= 1:
                break
            lines = max(1, min(lines - 1, whole - whole // 10))
        return data.decode("utf-8", errors="replace")

    def _read_log(self, namespace: str, name: str, *, tail_lines: int, previous: bool) -> bytes:
        def attempt(_retried: bool) -> bytes:
            with translated():
                response = self._log_response(
                    namespace, name, self.requests.timeout, tail_lines=tail_lines, previous=previous
                )
                return bytes(response.data)

        return kube_retry.call(self.requests, f"reading the log of {namespace}/{name}", attempt)

    def _log_response(self, namespace: str, name: str, timeout: tuple[float, float], **params: Any) -> Any:
        """The raw urllib3 response of the pod's log, at most LOG_LIMIT_BYTES (typed as str by the
        client, but `_preload_content=False` hands back the response itself)."""
        return self.core.read_namespaced_pod_log(
            name,
            namespace,
            limit_bytes=LOG_LIMIT_BYTES,
            _preload_content=False,
            _request_timeout=timeout,
            **params,
        )

    def follow_log(
        self, namespace: str, name: str, *, until: Callable[[str], bool], seconds: float
    ) -> str | None:
        """Follow the pod's output from its first line (`follow=true`, streamed, not polled) until `until`
        accepts a line, which is returned; None when the output ends or `seconds` pass first. The read
        timeout bounds one silent stretch, the loop the whole wait."""
        stop_at = time.monotonic() + seconds
        with translated():
            response = self._log_response(namespace, name, (self.requests.timeout[0], seconds), follow=True)
            try:
                pending = b""
                for chunk in response.stream(4096, decode_content=True):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        text: str = line.decode("utf-8", errors="replace")
                        if until(text):
                            return text
                    if time.monotonic() > stop_at:
                        return None
                return None
            finally:
                response.release_conn()

    def create_pod(self, manifest: Mapping[str, Any]) -> workloads.Workload:
        """Create, retried: gpubot's pod names are deterministic, so a retry whose first attempt landed
        meets AlreadyExists, and a pod carrying every label and annotation we sent is that attempt."""
        if not workloads.is_managed(manifest):
            raise errors.Invalid(f"refusing to create a pod without {labels.MANAGED_SELECTOR}")
        metadata = manifest.get("metadata") or {}
        namespace, name = str(metadata.get("namespace") or self.namespace), str(metadata.get("name", ""))
        body = pod_body(self.api, manifest)
        create = functools.partial(self.core.create_namespaced_pod, namespace, body)
        created = self._write_pod(f"creating pod {namespace}/{name}", namespace, name, metadata, create)
        workload = workloads.from_pod(created)
        if workload is None:
            raise errors.Invalid("the API server dropped gpubot's labels from the created pod")
        logger.info("created pod %s", workload.key)
        return workload

    def delete_pod(self, namespace: str, name: str, *, uid: str = "", resource_version: str = "") -> None:
        """Retried: deleting a pod twice is deleting it (or NotFound, which callers take as gone). With
        `uid`, the API's precondition makes sure a namesake made since is never the one deleted; with
        `resource_version`, that nothing changed the pod since. A retry whose first attempt landed meets
        that Conflict, and a pod of that uid already being deleted is that attempt."""
        preconditions = client.V1Preconditions(uid=uid or None, resource_version=resource_version or None)
        body = client.V1DeleteOptions(preconditions=preconditions) if uid or resource_version else None

        def being_deleted() -> Obj | None:
            found = self._read_pod(namespace, name)
            meta = (found or {}).get("metadata") or {}
            return found if meta.get("deletionTimestamp") and (not uid or meta.get("uid") == uid) else None

        delete = functools.partial(self.core.delete_namespaced_pod, name, namespace, body=body)
        self._write(f"deleting pod {namespace}/{name}", being_deleted, delete)
        logger.info("deleting pod %s/%s", namespace, name)

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str], *, resource_version: str = ""
    ) -> str:
        """Retried: the patch sets fixed values. With `resource_version`, a retry whose first attempt
        landed meets Conflict, and a pod already holding every annotation we sent is that attempt."""
        metadata: Obj = {"annotations": dict(annotations)}
        if resource_version:
            metadata["resourceVersion"] = resource_version  # the API's precondition on a patch
        patch = functools.partial(
            self.core.patch_namespaced_pod, name, namespace, {"metadata": metadata}, _content_type=MERGE_PATCH
        )
        written = self._write_pod(f"annotating pod {namespace}/{name}", namespace, name, metadata, patch)
        logger.info("annotated pod %s/%s: %s", namespace, name, ", ".join(sorted(annotations)))
        return str((written.get("metadata") or {}).get("resourceVersion") or "")

    def _write_pod(
        self, what: str, namespace: str, name: str, metadata: Mapping[str, Any], request: Callable[..., Any]
    ) -> Obj:
        """A write of one pod's `metadata`, retried. Its answers may be lost while it lands (timeouts):
        a Conflict met by a retry, or the last failure, is then checked against the pod itself. If it
        carries every label and annotation of `metadata`, that is a write of ours whose answer was lost;
        if not (or there is no such pod), the write did not happen, or someone else's did."""

        def landed() -> Obj | None:
            found = self._read_pod(namespace, name)
            if found is None or not kube_retry.carries(found, metadata):
                return None
            logger.info("pod %s/%s already holds a write whose answer was lost", namespace, name)
            return found

        try:
            return self._write(what, landed, request)
        except errors.Unavailable:
            found = landed()
            if found is None:
                raise
            return found

    def list_workloads(self, owner: str | None = None) -> list[workloads.Workload]:
        selector = labels.MANAGED_SELECTOR
        if owner is not None:
            selector += f",{labels.OWNER_LABEL}={labels.to_label_value(owner)}"
        found = [
            workload
            for pod in self._list(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
            if (workload := workloads.from_pod(pod)) is not None
        ]
        return sorted(
            (w for w in found if owner is None or w.owner_id == owner), key=lambda w: (w.namespace, w.name)
        )

    def get_workload(self, namespace: str, name: str) -> workloads.Workload | None:
        pod = self._read_pod(namespace, name)
        return workloads.from_pod(pod) if pod is not None else None

    # -- nodes and the autoscaler --------------------------------------------------------------
    def list_nodes(self) -> list[lifecycle.NodeSeen]:
        nodes = self._list(self.core.list_node)
        return sorted((workloads.observe_node(node) for node in nodes), key=lambda n: n.name)

    def list_pods_on_nodes(self, nodes: Iterable[str]) -> list[Obj]:
        """One list per node with the `spec.nodeName` field selector, which every API server indexes.

        In every namespace when RBAC allows it (the chart's `rbac.listPodsInAllNamespaces`), so a drain
        blocked by someone else's pod can be named; else in the workload namespace alone: the chart's
        default, which keeps other teams' pods out of the bot's sight."""
        wanted = sorted(set(nodes))
        if self._pods_everywhere:
            try:
                return self._pods_on(wanted, self.core.list_pod_for_all_namespaces)
            except errors.Forbidden:
                self._pods_everywhere = False
                logger.info(
                    "pods in other namespaces are not readable; drains are judged on %s", self.namespace
                )
        return self._pods_on(wanted, self.core.list_namespaced_pod, self.namespace)

    def _pods_on(self, nodes: list[str], list_fn: Callable[..., Any], *args: Any) -> list[Obj]:
        return [
            pod
            for node in nodes
            for pod in self._list(list_fn, *args, field_selector=f"spec.nodeName={node}")
        ]

    def read_autoscaler_status(self) -> str | None:
        namespace, name = AUTOSCALER_STATUS
        found = self._find(
            "reading the autoscaler status", self.core.read_namespaced_config_map, name, namespace
        )
        status = ((found or {}).get("data") or {}).get(AUTOSCALER_STATUS_KEY)
        return str(status) if status is not None else None

    # -- what gpubot doctor reads (ports.ClusterProbe) -------------------------------------------
    def list_node_objects(self) -> list[Obj]:
        return self._list(self.core.list_node)

    def read_autoscaler_configmap(self) -> doctor_facts.AutoscalerFacts:
        """A 404 is an answer here (no autoscaler), and its Date still tells the server's clock."""
        namespace, name = AUTOSCALER_STATUS
        with translated():
            try:
                response: Any = self.core.read_namespaced_config_map(
                    name, namespace, _preload_content=False, _request_timeout=self.requests.timeout
                )
            except ApiException as err:
                if err.status != 404:
                    raise
                return doctor_facts.AutoscalerFacts(now=server_time(err.headers))
            now = server_time(response.headers)
            found = read_json(response)
        stamp = ((found.get("metadata") or {}).get("annotations") or {}).get(AUTOSCALER_LAST_UPDATED, "")
        status = (found.get("data") or {}).get(AUTOSCALER_STATUS_KEY)
        return doctor_facts.AutoscalerFacts(
            text=str(status) if status is not None else "",
            last_updated=autoscaler_status.parse_last_updated(str(stamp)),
            now=now,
        )

    def review_access(self, rule: doctor_facts.AccessRule) -> doctor_facts.AccessAnswer:
        attributes = client.V1ResourceAttributes(
            verb=rule.verb,
            resource=rule.resource,
            group=rule.group,
            namespace=rule.namespace or None,
            name=rule.name or None,
            subresource=rule.subresource or None,
        )
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
        )
        review_fn = client.AuthorizationV1Api(self.api).create_self_subject_access_review  # changes nothing
        found = self.read(f"reviewing access to {rule.verb} {rule.resource}", review_fn, review)
        status = found.get("status") or {}
        reason = status.get("reason") or status.get("evaluationError") or ""
        return doctor_facts.AccessAnswer(rule, allowed=status.get("allowed") is True, reason=str(reason))

    def _list(self, list_fn: Callable[..., Any], *args: str, **selectors: str) -> list[Obj]:
        """Every object `list_fn` lists under `label_selector` or `field_selector`, if given."""
        what = f"listing {getattr(list_fn, '__name__', 'objects')}"
        listed = pages(
            lambda token: self.read(what, list_fn, *args, **selectors, limit=LIST_PAGE, _continue=token)
        )
        return [item for page in listed for item in page.get("items") or []]

    # -- informers -----------------------------------------------------------------------------
    def start_informers(
        self, *, on_pod: ports.WatchCallback, on_event: ports.WatchCallback, on_node: ports.WatchCallback
    ) -> None:
        if self.informers:
            raise RuntimeError("informers already started")
        self.add_informer(
            Source("Pod", self.core.list_namespaced_pod, (self.namespace,), labels.MANAGED_SELECTOR), on_pod
        )
        # Every listener ignores an event's deletion, so the cache keeps each event's identity only.
        self.add_informer(
            Source("Event", self.core.list_namespaced_event, (self.namespace,), keep=identity), on_event
        )
        self.add_informer(Source("Node", self.core.list_node), on_node)

    def watch_config(self, name: str, callback: ports.WatchCallback) -> None:
        """One more informer, over one ConfigMap of the namespace, that every replica shares."""
        field_selector = f"metadata.name={name}"
        list_fn = self.core.list_namespaced_config_map
        self.add_informer(
            Source("ConfigMap", list_fn, (self.namespace,), field_selector=field_selector), callback
        )

    def add_informer(self, source: Source, callback: ports.WatchCallback) -> None:
        """Start one more informer, which `stop()` ends with the others."""
        informer = Informer(source, callback, self.informer_settings)
        self.informers.append(informer)
        informer.start()

    # -- a ConfigMap of the bot's own --------------------------------------------------------------
    def read_config(self, name: str) -> ports.StoredConfig | None:
        read = self.core.read_namespaced_config_map
        found = self._find(f"reading ConfigMap {name}", read, name, self.namespace)
        return stored_config(found) if found is not None else None

    def write_config(self, name: str, data: Mapping[str, str], *, version: str | None) -> None:
        """Create it (`version` None), or replace the one read at `version`; a newer one raises Conflict."""
        metadata: dict[str, Any] = {
            "name": name,
            "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY_VALUE},
        }
        body: Any = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": dict(data)}
        # a plain dict serialises as it is; the client's V1ConfigMap would only be turned back into one
        with translated():
            if version is None:
                self.core.create_namespaced_config_map(self.namespace, body)
            else:
                metadata["resourceVersion"] = version
                self.core.replace_namespaced_config_map(name, self.namespace, body)

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not informer.synced.wait(left):
                return False
        return bool(self.informers)

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()
        for informer in self.informers:
            if not informer.join(self.informer_settings.join_timeout_seconds):
                logger.warning("%s informer did not stop in time", informer.source.kind)
        self.informers = []


def connect(found: ClusterSettings) -> KubeCluster:
    """The cluster settings point at: the in-cluster service account, or a kubeconfig (empty: default)."""
    if found.in_cluster:
        configuration = kube_retry.without_transport_retries()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return KubeCluster(client.ApiClient(configuration), namespace=found.namespace)
    return KubeCluster.from_kubeconfig(
        found.kubeconfig or None, namespace=found.namespace, context=found.context or None
    )
