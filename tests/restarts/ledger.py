"""What the restart tests count: every gpubot pod ever created (from the sim's store), and threads in Slack.

The pod ledger listens to the sim's single commit path, so a pod created and deleted between two looks
is still counted; duplicates are two pods for one thread or more pods than requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.core import labels
from sim.cluster import world
from sim.cluster.store import ADDED, DELETED, Change
from sim.slack.runner import BackgroundSlack

Json = dict[str, Any]
SUMMARY_BLOCK = "gpubot_summary"
ACTIONS_BLOCK = "gpubot_actions"


@dataclass
class PodLedger:
    """Every gpubot pod the sim has stored: name → thread ts, and which are deleted."""

    created: dict[str, str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    def record(self, change: Change) -> None:
        if change.resource != "pods":
            return
        metadata = change.obj["metadata"]
        if (metadata.get("labels") or {}).get(labels.MANAGED_BY_LABEL) != labels.MANAGED_BY_VALUE:
            return
        if change.type == ADDED:
            self.created[metadata["name"]] = (metadata.get("annotations") or {}).get(
                labels.THREAD_TS_ANNOTATION, ""
            )
        elif change.type == DELETED:
            self.deleted.add(metadata["name"])

    @property
    def live(self) -> set[str]:
        return set(self.created) - self.deleted

    def threads_with_two_pods(self) -> list[str]:
        seen: dict[str, int] = {}
        for thread in self.created.values():
            seen[thread] = seen.get(thread, 0) + 1
        return sorted(t for t, count in seen.items() if count > 1)


def pod_ledger(sim: world.BackgroundWorld) -> PodLedger:
    ledger = PodLedger()
    sim.run(lambda: sim.world.store.subscribe(ledger.record))
    return ledger


# -- threads --------------------------------------------------------------------------------------------


def roots(slack: BackgroundSlack, channel: str = "C_GPU") -> list[Json]:
    return [m for m in slack.messages(channel) if not m["thread_ts"] and m["bot_id"]]


def block_ids(message: Json) -> set[str]:
    return {str(b.get("block_id", "")) for b in message.get("blocks") or []}


def is_closed(root: Json) -> bool:
    """The root shows a final state: the thread's status with no buttons left to press (they go when it is
    over), or the launcher's refusal."""
    ids = block_ids(root)
    refused = root["text"].startswith(":x:") or root["text"].startswith("&lt;:x:")
    return ACTIONS_BLOCK not in ids and (SUMMARY_BLOCK in ids or refused)


def open_threads(slack: BackgroundSlack, channel: str = "C_GPU") -> list[Json]:
    return [root for root in roots(slack, channel) if not is_closed(root)]


def replies(slack: BackgroundSlack, root: Json, words: str = "") -> list[Json]:
    return [
        m
        for m in slack.messages(root["channel"])
        if m["thread_ts"] == root["ts"] and m["ts"] != root["ts"] and words in m["text"]
    ]


def texts(messages: Iterable[Json]) -> list[str]:
    return [m["text"] for m in messages]


def dms(slack: BackgroundSlack, user: str, words: str = "") -> list[Json]:
    """Messages the bot sent `user` in their DM (the emulator names a DM `D` + the user id's tail)."""
    return [m for m in slack.messages("D" + user.removeprefix("U")) if m["bot_id"] and words in m["text"]]
