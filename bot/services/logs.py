"""Services: `/gpu logs` and the Logs button: a workload's output, for its owner or an admin.

The output is read from the API server when asked (`pods/log`), never stored by gpubot: Kubernetes keeps
it while the pod exists, and the reply is an ephemeral only the asker sees. An answer longer than a screen
shows its last lines there and goes whole, as a text file, to the asker's DMs: a file can be scrolled,
searched and downloaded, and only the asker (and Slack's admins) can open a DM's file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from bot.core import errors, models, notices, ports, workloads
from bot.services import launcher, leases

logger = logging.getLogger(__name__)

EPOCH = datetime.min.replace(tzinfo=UTC)
"""Where a pod with no creation time sorts: before every other."""
SCREEN_LINES = 50
"""The most lines an ephemeral shows: the default `--tail`, about a laptop's screenful of a thread. An answer
with more lines (or whose lines do not all fit in the chat's one code block) goes whole as a file, and the
ephemeral keeps its last lines: past a screen, a message is a wall to scroll past, a file is a log to read."""
UPLOAD_WAIT_SECONDS = 20.0
"""How long the asker's answer waits for the file: the ephemeral says whether it went, so it comes after.
Slack stores a 1 MiB file in about a second; past this, the ephemeral says it could not be sent."""

Fits = Callable[[Sequence[str]], bool]
"""Whether the chat shows all these lines of output, whole, in one message (Slack: one code block)."""


def plan_excerpt(lines: Sequence[str], fits: Fits) -> tuple[tuple[str, ...], bool]:
    """The last lines the ephemeral shows (at most `SCREEN_LINES`, as many as fit), and whether the answer
    needs a file because they are not all of it, or the one line left does not fit whole."""
    shown = tuple(lines[-SCREEN_LINES:])
    while len(shown) > 1 and not fits(shown):
        shown = shown[1:]
    return shown, len(shown) < len(lines) or not fits(shown)


class Logs:
    def __init__(
        self,
        cluster: ports.Cluster,
        chat_port: ports.Chat,
        lease_service: leases.Leases,
        *,
        fits: Fits,
        upload_wait: float = UPLOAD_WAIT_SECONDS,
    ) -> None:
        self._cluster = cluster
        self._chat = chat_port
        self._leases = lease_service
        self._fits = fits
        self._upload_wait = upload_wait

    def handle(self, request: models.LogsRequest, actor: str, channel: str) -> None:
        with launcher.failures_told(self._chat, channel, actor, "/gpu logs"):
            workload = self._target(request, actor, channel)
            if workload is not None and self._leases.may_act(
                workload, actor, channel, "read", what="its output"
            ):
                self._chat.ephemeral(channel, actor, self.answer(workload, request.tail, reader=actor))

    def logs_key(self, key: str, actor: str, channel: str) -> None:
        """The Logs button; its value is the workload's `namespace/name`."""
        name = self._leases.button_target(key, actor, channel)
        if name is not None:
            self.handle(models.LogsRequest(name=name), actor, channel)

    def answer(self, workload: workloads.Workload, tail: int, *, reader: str) -> notices.Ephemeral:
        """The last `tail` lines for `reader` (already allowed to read them): all in the ephemeral when they
        fit, else the last that fit there and all of them as a file in the reader's DMs."""
        name, phase = workload.name, workload.phase
        try:
            output = self._cluster.read_log(workload.namespace, name, tail_lines=tail)
        except errors.NotFound:
            return notices.Ephemeral(f"`{name}` is gone, and its output with it. Try: `/gpu status`")
        except errors.Invalid as err:  # the API server's own words: still ContainerCreating, image pull…
            return notices.Ephemeral(f"`{name}` has no output yet: {err.message}. Try again once it runs.")
        lines = tuple(output.splitlines())
        if not lines:
            return notices.Ephemeral(f"`{name}` ({phase}) has printed nothing yet.")
        more = f" More: `{kubectl_logs(workload)} --tail N`" if len(lines) >= tail else ""
        shown, needs_file = plan_excerpt(lines, self._fits)
        if not needs_file:
            return notices.Ephemeral(f"The last {len(lines)} lines of `{name}` ({phase}):{more}", lines)
        told = self._send_file(workload, output, len(lines), tail=tail, reader=reader)
        head = f"The last {len(shown)} of {len(lines):,} lines of `{name}` ({phase}):{more}"
        return notices.Ephemeral(f"{head}\n{told}", shown)

    def _send_file(
        self, workload: workloads.Workload, output: str, count: int, *, tail: int, reader: str
    ) -> str:
        """Upload the whole answer to the reader's DMs; the ephemeral's line saying where it went, or that it
        did not and how to read it instead."""
        filename = f"{workload.name}.log"
        comment = f"The output of `{workload.name}` ({workload.phase}): its last {count:,} lines."
        try:
            self._chat.upload(reader, filename, output, comment=comment, timeout=self._upload_wait)
        except errors.GpubotError as err:
            logger.warning("could not send the output of %s to %s as a file: %s", workload.name, reader, err)
            return (
                f":warning: I could not send all {count:,} lines as a file ({err}). "
                f"Read them with `{kubectl_logs(workload)} --tail {tail}`"
            )
        return f":page_facing_up: All {count:,} lines went to your DMs as a file, `{filename}`."

    def _target(self, request: models.LogsRequest, actor: str, channel: str) -> workloads.Workload | None:
        if request.name:
            return self._leases.find(request.name, actor, channel)
        mine = self._cluster.list_workloads(actor)
        if not mine:
            self._chat.ephemeral(
                channel, actor, notices.Ephemeral("You have no workloads. Try: `/gpu run IMAGE -- CMD`")
            )
            return None
        return max(mine, key=lambda w: w.created_at or EPOCH)


def kubectl_logs(workload: workloads.Workload) -> str:
    return f"kubectl logs -n {workload.namespace} {workload.name}"
