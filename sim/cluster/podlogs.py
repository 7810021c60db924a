"""`GET …/pods/{name}/log`: the apiserver's pods/log subresource and the kubelet's containerLogs behind it.

Checks run in upstream's order: the query is decoded (400) and validated (422, ValidatePodLogOptions), the pod
read (404), the container chosen (strategy.go LogLocation, 400); a pod on no node answers 204 No Content
(LocationStreamer with no location); then the kubelet's validateContainerLogStatus picks the container
instance from the pod's status (400 while it waits to start) and its log streams as text/plain. `follow`
keeps the response open, woken by each new line, until that instance stops.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web

from sim.cluster import errors, logs, messages
from sim.cluster.store import Obj, Store

RFC3339 = "2006-01-02T15:04:05Z07:00"


@dataclass(frozen=True)
class Options:
    """core/v1 PodLogOptions, decoded from the query as the apiserver's parameter codec does."""

    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    since_time: datetime | None = None
    limit_bytes: int | None = None


async def serve(
    request: web.Request, store: Store, kept: logs.LogStore, namespace: str, name: str
) -> web.StreamResponse:
    options = parse_options(request.query)
    validate(options, name)
    pod = store.get("pods", namespace, name)
    if pod is None:
        raise errors.not_found(errors.ResourceRef("", "pods", "Pod", name))
    container = choose_container(pod, options.container)
    node = pod["spec"].get("nodeName")
    if not node:
        return web.Response(status=204)  # responsewriters.StreamObject: "No output provided"
    if store.get("nodes", "", node) is None:  # NodeConnectionInfoGetter: the node's own NotFound
        raise errors.not_found(errors.ResourceRef("", "nodes", "Node", node))
    log = kept.get(container_id(pod, container, previous=options.previous)) or logs.ContainerLog(closed=True)
    since = _since(options, store)
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    if options.follow:
        response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        await _stream(_Writer(response, store, options), log, options, since)
        await response.write_eof()
    except ConnectionResetError:  # the client hung up (kubectl logs -f interrupted)
        pass
    return response


async def _stream(writer: _Writer, log: logs.ContainerLog, options: Options, since: float | None) -> None:
    sent = len(log.entries)
    await writer.write(logs.select(log.entries[:sent], tail=options.tail_lines, since=since))
    while options.follow and not writer.full and (sent < len(log.entries) or not log.closed):
        changed = log.changed()  # taken before reading, so a line written meanwhile still wakes us
        fresh = log.entries[sent:]
        sent += len(fresh)
        await writer.write(logs.select(fresh, tail=None, since=since))
        if sent == len(log.entries) and not log.closed:
            await changed.wait()


class _Writer:
    """Renders lines to the response, keeping line starts across writes and stopping at `limitBytes`."""

    def __init__(self, response: web.StreamResponse, store: Store, options: Options) -> None:
        self.response, self.clock, self.options = response, store.clock, options
        self.line_start = True
        self.left = options.limit_bytes

    @property
    def full(self) -> bool:
        return self.left is not None and self.left <= 0

    async def write(self, entries: list[logs.Entry]) -> None:
        if not entries or self.full:
            return
        text = logs.render(
            entries, self.clock, timestamps=self.options.timestamps, line_start=self.line_start
        )
        self.line_start = not entries[-1].partial
        data = text.encode()
        if self.left is not None:
            data = data[: self.left]
            self.left -= len(data)
        await self.response.write(data)


# -- the query ------------------------------------------------------------------------------------


def parse_options(query: Mapping[str, str]) -> Options:
    """zz_generated Convert_url_Values_To_v1_PodLogOptions: the first value of each parameter; unknown ones
    are ignored. A decoding error is a 400 carrying Go's own error text (GetResourceWithOptions)."""
    return Options(
        container=query.get("container", ""),
        follow=_bool(query.get("follow")),
        previous=_bool(query.get("previous")),
        timestamps=_bool(query.get("timestamps")),
        tail_lines=_int(query.get("tailLines")),
        since_seconds=_int(query.get("sinceSeconds")),
        since_time=_time(query.get("sinceTime")),
        limit_bytes=_int(query.get("limitBytes")),
    )


def _bool(value: str | None) -> bool:
    """apimachinery runtime/conversion.go Convert_Slice_string_To_bool: "0" and "false" (any case) are
    false, any other value (even empty) true."""
    if value is None:
        return False
    return not (value == "0" or value.lower() == "false")


def _int(value: str | None) -> int | None:
    """runtime/conversion.go Convert_Slice_string_To_Pointer_int64: strconv.ParseInt(s, 10, 64)."""
    if value is None:
        return None
    if not re.fullmatch(r"[+-]?\d+", value):
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')  # Go strconv/atoi.go
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')  # Go strconv
    return number


_RFC3339_ELEMENTS = (
    ("2006", r"\d{4}"),
    ("-", "-"),
    ("01", r"\d{2}"),
    ("-", "-"),
    ("02", r"\d{2}"),
    ("T", "T"),
    ("15", r"\d{2}"),
    (":", ":"),
    ("04", r"\d{2}"),
    (":", ":"),
    ("05", r"\d{2}(?:[.,]\d+)?"),
    ("Z07:00", r"Z|[+-]\d{2}:\d{2}"),
)


def _time(value: str | None) -> datetime | None:
    """metav1.Time.UnmarshalQueryParameter: empty or "null" is no time, else time.Parse(time.RFC3339, s),
    whose errors (Go's time.ParseError) are copied for the layout's elements and trailing text."""
    if value is None or value in ("", "null"):
        return None
    rest = value
    for element, pattern in _RFC3339_ELEMENTS:
        match = re.match(pattern, rest)
        if match is None:  # Go time/format.go ParseError.Error()
            raise errors.bad_request(
                f'parsing time "{value}" as "{RFC3339}": cannot parse "{rest}" as "{element}"'
            )
        rest = rest[match.end() :]
    if rest:
        raise errors.bad_request(f'parsing time "{value}": extra text: "{rest}"')  # Go time/format.go
    month, hour, minute, second = (int(value[i : i + 2]) for i in (5, 11, 14, 17))
    for element, bad in (("month", not 1 <= month <= 12), ("hour", hour > 23), ("minute", minute > 59)):
        if bad:  # Go time/format.go Parse: the range checks, in the order it reads the elements
            raise errors.bad_request(f'parsing time "{value}": {element} out of range')
    if second > 59:
        raise errors.bad_request(f'parsing time "{value}": second out of range')  # Go time/format.go
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00").replace(",", "."))
    except ValueError:
        raise errors.bad_request(f'parsing time "{value}": day out of range') from None  # Go time/format.go


def validate(options: Options, name: str) -> None:
    """pkg/apis/core/validation ValidatePodLogOptions, answered as NewInvalid(Kind("PodLogOptions"))."""
    causes = []
    if options.tail_lines is not None and options.tail_lines < 0:
        causes.append(errors.invalid_value("tailLines", options.tail_lines, messages.NOT_NEGATIVE))
    if options.limit_bytes is not None and options.limit_bytes < 1:
        causes.append(errors.invalid_value("limitBytes", options.limit_bytes, messages.GREATER_THAN_ZERO))
    if options.since_seconds is not None and options.since_time is not None:
        causes.append(errors.forbidden("", messages.ONE_OF_SINCE))
    elif options.since_seconds is not None and options.since_seconds < 1:
        causes.append(errors.invalid_value("sinceSeconds", options.since_seconds, messages.GREATER_THAN_ZERO))
    if causes:
        raise _invalid(name, causes)


def _invalid(name: str, causes: list[errors.Cause]) -> errors.ApiError:
    """apimachinery errors.NewInvalid; field.Error prints `<field>: <detail>` even when the field is
    empty (the since check's field.NewPath("")), which errors.invalid leaves out."""
    rendered = [f"{c.field}: {c.message}" for c in causes]
    aggregate = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    details = {
        "name": name,
        "kind": "PodLogOptions",
        "causes": [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes],
    }
    return errors.ApiError(422, "Invalid", f'PodLogOptions "{name}" is invalid: {aggregate}', details)


def _since(options: Options, store: Store) -> float | None:
    """kubelet's newLogOptions: sinceSeconds counts back from now; sinceTime is absolute."""
    if options.since_seconds is not None:
        return store.clock.now() - options.since_seconds
    if options.since_time is not None:
        return store.clock.from_datetime(options.since_time.astimezone(UTC))
    return None


# -- the container ------------------------------------------------------------------------------


def choose_container(pod: Obj, container: str) -> str:
    """strategy.go validateContainer: the only container by default; a named one must exist (ephemeral
    ones count, as podutil.VisitContainers visits them)."""
    spec = pod["spec"]
    kinds = ("initContainers", "containers", "ephemeralContainers")
    names = [c["name"] for key in kinds for c in spec.get(key) or []]
    if container:
        if container not in names:
            raise errors.bad_request(messages.container_not_valid(container, pod["metadata"]["name"]))
        return container
    if len(spec.get("containers") or []) == 1:
        return str(spec["containers"][0]["name"])
    raise errors.bad_request(messages.container_name_required(pod["metadata"]["name"], names))


def container_id(pod: Obj, container: str, *, previous: bool) -> str:
    """kubelet_pods.go validateContainerLogStatus: which instance's log to read, from the pod's status."""
    name = pod["metadata"]["name"]
    status = _status_of(pod, container)
    if status is None:
        raise errors.bad_request(messages.container_not_available(container, name))
    state, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated")
    if previous:
        if not last or not last.get("containerID"):
            raise errors.bad_request(messages.previous_not_found(container, name))
        return str(last["containerID"])
    if "running" in state:
        return str(status.get("containerID", ""))
    ended = state.get("terminated") or last
    if ended is not None:
        found = ended.get("containerID") or (last or {}).get("containerID")
        if not found:
            raise errors.bad_request(messages.container_terminated(container, name))
        return str(found)
    if "waiting" in state:
        reason = str(state["waiting"].get("reason", ""))
        raise errors.bad_request(messages.waiting_to_start(container, name, reason))
    raise errors.bad_request(messages.waiting_no_logs(container, name))


def _status_of(pod: Obj, container: str) -> Obj | None:
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for status in pod.get("status", {}).get(key) or []:
            if status.get("name") == container:
                return dict(status)
    return None
