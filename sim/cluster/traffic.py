"""What clients ask of the API server: requests by client, verb and resource, and the watches open now.

A real apiserver exports the same as `apiserver_request_total` and `apiserver_longrunning_requests`; the
sim keys them by User-Agent too, so a benchmark can tell one client's load from another's on one server.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

UNKNOWN_AGENT = "unknown"


@dataclass(frozen=True, order=True)
class RequestKey:
    user_agent: str
    verb: str
    """The apiserver's verbs: get, list, watch, create, update, patch, delete, deletecollection."""
    resource: str
    """The plural, with `/subresource` when there is one (`pods/binding`, `pods/status`)."""


def verb_of(method: str, *, collection: bool, watch: bool) -> str:
    """The apiserver's verb for an HTTP method on a collection or a named object."""
    if method == "GET":
        return ("watch" if watch else "list") if collection else "get"
    if method == "DELETE":
        return "deletecollection" if collection else "delete"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


class Traffic:
    def __init__(self) -> None:
        self.requests: collections.Counter[RequestKey] = collections.Counter()
        self.watches: collections.Counter[tuple[str, str]] = collections.Counter()
        """(user agent, resource) → watches open now."""
        self.peak_watches: collections.Counter[str] = collections.Counter()
        """User agent → the most watches it held open at once since the last reset."""

    def count(self, user_agent: str, verb: str, resource: str) -> None:
        self.requests[RequestKey(user_agent or UNKNOWN_AGENT, verb, resource)] += 1

    @contextlib.contextmanager
    def watching(self, user_agent: str, resource: str) -> Iterator[None]:
        """Count a watch as open for as long as its stream is."""
        agent = user_agent or UNKNOWN_AGENT
        self.watches[(agent, resource)] += 1
        self.peak_watches[agent] = max(self.peak_watches[agent], self.open_watches(agent))
        try:
            yield
        finally:
            self.watches[(agent, resource)] -= 1
            if not self.watches[(agent, resource)]:
                del self.watches[(agent, resource)]

    def open_watches(self, user_agent: str) -> int:
        return sum(n for (agent, _), n in self.watches.items() if agent == user_agent)

    def reset(self) -> None:
        """Start counting requests afresh; open watches stay open (and set the new peak)."""
        self.requests.clear()
        self.peak_watches.clear()
        for (agent, _), _count in self.watches.items():
            self.peak_watches[agent] = self.open_watches(agent)

    def snapshot(self) -> dict[str, Any]:
        """What `GET /simctl/v1/traffic` answers."""
        return {
            "requests": [
                {"userAgent": k.user_agent, "verb": k.verb, "resource": k.resource, "count": n}
                for k, n in sorted(self.requests.items())
            ],
            "watches": [
                {"userAgent": agent, "resource": resource, "open": n}
                for (agent, resource), n in sorted(self.watches.items())
            ],
            "peakWatches": dict(sorted(self.peak_watches.items())),
        }
