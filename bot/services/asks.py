"""Service: "Ask for a GPU": a waiter at a full pool asks the owners of idle GPUs there, once each.

The owners get a DM with Release and Keep (the buttons of the reaper's idle warning, handled by `leases`);
the asker is told how many were asked. Each owner is asked once per waiter for an idle window, however
often the button is pressed, so a queue cannot turn into a stream of DMs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from bot.core import notices, ports, queue, workloads
from bot.services import launcher, leases

logger = logging.getLogger(__name__)


class Asks:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: ports.Chat,
        lease_service: leases.Leases,
        *,
        clock: Callable[[], datetime],
        once_per: timedelta,
        store: ports.Store | None = None,
    ) -> None:
        """`once_per`: how long one owner is not asked again for the same waiter (the idle window)."""
        self._cluster = cluster
        self._chat = chat_port
        self._leases = lease_service
        self._clock = clock
        self._once_per = once_per
        self._store = store

    def ask_key(self, key: str, actor: str, channel: str) -> None:
        """The Ask for a GPU button; its value is the waiting workload's `namespace/name`."""
        with launcher.failures_told(self._chat, channel, actor, "the Ask for a GPU button"):
            name = workloads.name_in_key(key)
            if name is None:
                self._tell(channel, actor, "That button does not name a gpubot workload; nothing was asked.")
                return
            self.ask(name, actor, channel)

    def ask(self, name: str, actor: str, channel: str) -> None:
        """DM the owners of the idle GPUs of the waiter's pool."""
        waiter = self._leases.find(name, actor, channel)
        if waiter is None or not self._leases.may_act(waiter, actor, channel, "ask for a GPU for"):
            return
        if waiter.node or waiter.deletion_requested or waiter.phase != "Pending":
            self._tell(
                channel, actor, f"`{waiter.name}` is not waiting for a GPU any more; nothing was asked."
            )
            return
        idle = queue.idle_to_ask(self._cluster.list_workloads(), waiter.profile, self._clock())
        asked = [holder for holder in idle if self._first_ask(waiter, holder)]
        who = waiter.requester_name or "Someone"
        for holder in asked:
            logger.info("%s asks %s for its idle GPU", waiter.key, holder.key)
            text = queue.ask_text(who, holder)
            buttons = notices.Buttons(keep_asked=True, release=True)
            self._chat.dm(holder.owner_id, notices.Reminder(text, holder.key, buttons, holder.channel))
        self._tell(channel, actor, said(len(asked), len(idle), waiter.profile))

    def _first_ask(self, waiter: workloads.Workload, holder: workloads.Workload) -> bool:
        if not holder.owner_id:
            return False
        if self._store is None:
            return True
        return self._store.claim(f"gpu-ask:{waiter.key}:{holder.key}", int(self._once_per.total_seconds()))

    def _tell(self, channel: str, user: str, text: str) -> None:
        self._chat.ephemeral(channel, user, notices.Ephemeral(text))


def said(asked: int, idle: int, profile: str) -> str:
    """The asker's answer: how many owners were asked, or why none was."""
    if asked:
        owners = "the owner" if asked == 1 else f"the {asked} owners"
        return (
            f"Asked {owners} of idle {profile} GPUs to release one. You stay in line; "
            "your thread mentions you when your pod starts."
        )
    if idle:
        return f"The owners of the idle {profile} GPUs were asked for this run already; you stay in line."
    return (
        f"No {profile} GPU has been idle long enough to ask its owner (the reaper's idle warning comes "
        "first); you stay in line."
    )
