"""Container output as the node keeps it: a log per container instance, line by line, stamped by the clock.

The kubelet writes what a container prints (`scripts.Program` chunks, played on the clock); the API server's
`pods/log` reads it. Lines are split as containerd's CRI logger splits them: a line is stamped when its
newline arrives, and text left without one when the container stops is kept as a partial line. Followers
wait on an event each log sets when it changes; nothing polls.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from sim.clock import Clock

KEPT_INSTANCES = 2
"""Instances kept per container, as kubelet keeps the current and the previous log (`--previous`)."""


@dataclass(frozen=True)
class Entry:
    at: float
    """Simulated seconds when the line was written."""
    stream: str
    text: str
    """Without its newline."""
    partial: bool = False
    """No newline: the container stopped mid-line."""


@dataclass
class ContainerLog:
    """One container instance's output, growing while it runs."""

    entries: list[Entry] = field(default_factory=list)
    closed: bool = False
    _pending: dict[str, tuple[float, str]] = field(default_factory=dict)
    _waiters: list[asyncio.Event] = field(default_factory=list)

    def write(self, at: float, stream: str, text: str) -> None:
        if self.closed:
            return
        _, buffered = self._pending.pop(stream, (at, ""))
        *lines, rest = (buffered + text).split("\n")
        for line in lines:
            self.entries.append(Entry(at, stream, line))
        if rest:
            self._pending[stream] = (at, rest)
        if lines:
            self._notify()

    def close(self) -> None:
        """The container stopped: what it left without a newline is a partial line; followers finish."""
        if self.closed:
            return
        for stream, (at, rest) in sorted(self._pending.items(), key=lambda item: item[1][0]):
            self.entries.append(Entry(at, stream, rest, partial=True))
        self._pending.clear()
        self.closed = True
        self._notify()

    def changed(self) -> asyncio.Event:
        """An event set at the next new line or at close; take it before reading, then wait on it."""
        event = asyncio.Event()
        self._waiters.append(event)
        return event

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()


class LogStore:
    """Every container instance's log on every node, by container ID, as the kubelets keep them."""

    def __init__(self) -> None:
        self._logs: dict[str, ContainerLog] = {}
        self._instances: dict[tuple[str, str], list[str]] = {}

    def open(self, pod_uid: str, container: str, container_id: str) -> ContainerLog:
        log = self._logs.get(container_id)
        if log is not None:
            return log
        log = self._logs[container_id] = ContainerLog()
        instances = self._instances.setdefault((pod_uid, container), [])
        instances.append(container_id)
        for old in instances[:-KEPT_INSTANCES]:
            self._logs.pop(old, None)
        del instances[:-KEPT_INSTANCES]
        return log

    def get(self, container_id: str) -> ContainerLog | None:
        return self._logs.get(container_id)

    def close(self, container_id: str) -> None:
        log = self._logs.get(container_id)
        if log is not None:
            log.close()

    def close_all(self) -> None:
        """The node stops: every follower finishes."""
        for log in self._logs.values():
            log.close()

    def forget(self, pod_uid: str) -> None:
        """The pod is gone, and its logs with it."""
        for key in [k for k in self._instances if k[0] == pod_uid]:
            for container_id in self._instances.pop(key):
                log = self._logs.pop(container_id, None)
                if log is not None:
                    log.close()


# -- reading ---------------------------------------------------------------------------------------


def select(entries: list[Entry], *, tail: int | None, since: float | None) -> list[Entry]:
    """kubelet's ReadLogs: the last `tail` lines first, then those written at or after `since`."""
    if tail is not None:
        entries = entries[len(entries) - tail :] if tail > 0 else []
    return [e for e in entries if since is None or e.at >= since]


def render(entries: list[Entry], clock: Clock, *, timestamps: bool, line_start: bool = True) -> str:
    """The bytes kubelet streams: a timestamp prefix (RFC3339NanoFixed, then a space) at each line start."""
    out = []
    for entry in entries:
        if timestamps and line_start:
            out.append(stamp(clock, entry.at) + " ")
        out.append(entry.text if entry.partial else entry.text + "\n")
        line_start = not entry.partial
    return "".join(out)


def stamp(clock: Clock, seconds: float) -> str:
    """pkg/kubelet/types/constants.go RFC3339NanoFixed, "2006-01-02T15:04:05.000000000Z07:00", in UTC."""
    moment = clock.to_datetime(seconds)  # the clock keeps microseconds; the last three digits are zeros
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}000Z"
