"""Streaming lists (`watch=true&sendInitialEvents=true`): the initial state as ADDED events, then a
BOOKMARK annotated `k8s.io/initial-events-end: "true"` saying the state is complete.

client-go's reflector (WatchListClient, which always allows bookmarks) waits for that bookmark
before it calls its cache synced; a bookmark without the annotation leaves it waiting. Options are
checked as ValidateListOptions does (staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/
validation/validation.go, v1.32.4, where the WatchList feature is on by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.cluster import errors
from sim.cluster.resources import Resource

INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # metav1.InitialEventsAnnotationKey
NOT_OLDER_THAN = "NotOlderThan"  # metav1.ResourceVersionMatchNotOlderThan


def _true(value: str | None) -> bool:
    return value in ("1", "true")


def sends_initial_events(query: Mapping[str, str], *, watching: bool) -> bool:
    """Whether the watch starts with the current state; refuses what ValidateListOptions refuses.
    The closing bookmark is sent only to a watch that allows bookmarks (the cacher's rule)."""
    initial = query.get("sendInitialEvents")
    match = query.get("resourceVersionMatch", "")
    causes: list[errors.Cause] = []
    if not watching:
        if initial is not None:
            causes.append(errors.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    else:
        if initial is not None and match != NOT_OLDER_THAN:
            causes.append(
                errors.forbidden(
                    "resourceVersionMatch",
                    f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
                )
            )
        if match and initial is None:
            causes.append(
                errors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                )
            )
        if match and match != NOT_OLDER_THAN:
            causes.append(errors.not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
    if causes:
        raise errors.invalid("ListOptions.meta.k8s.io", "", causes)
    return watching and _true(initial)


def initial_events_end(res: Resource, resource_version: int) -> dict[str, Any]:
    """The bookmark that closes the initial events, at the version the initial state was taken."""
    obj = {
        "kind": res.kind,
        "apiVersion": res.api_version,
        "metadata": {"resourceVersion": str(resource_version), "annotations": {INITIAL_EVENTS_END: "true"}},
    }
    return {"type": "BOOKMARK", "object": obj}
