"""Services: `/gpu logs` and the Logs button: a workload's output, for its owner or an admin.

The output is read from the API server when asked (`pods/log`), never stored by gpubot: Kubernetes keeps
it while the pod exists, and the reply is an ephemeral only the asker sees.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.core import errors, models, notices, ports, workloads
from bot.services import chat, launcher, leases

EPOCH = datetime.min.replace(tzinfo=UTC)
"""Where a pod with no creation time sorts: before every other."""


class Logs:
    def __init__(self, cluster: ports.Cluster, chat_port: chat.Chat, lease_service: leases.Leases) -> None:
        self._cluster = cluster
        self._chat = chat_port
        self._leases = lease_service

    def handle(self, request: models.LogsRequest, actor: str, channel: str) -> None:
        with launcher.failures_told(self._chat, channel, actor, "/gpu logs"):
            workload = self._target(request, actor, channel)
            if workload is not None and self._leases.may_act(
                workload, actor, channel, "read", what="its output"
            ):
                self._chat.ephemeral(channel, actor, self.excerpt(workload, request.tail))

    def logs_key(self, key: str, actor: str, channel: str) -> None:
        """The Logs button; its value is the workload's `namespace/name`."""
        self.handle(models.LogsRequest(name=key.rpartition("/")[2]), actor, channel)

    def excerpt(self, workload: workloads.Workload, tail: int) -> notices.Ephemeral:
        name, command = workload.name, f"kubectl logs -n {workload.namespace} {workload.name}"
        try:
            output = self._cluster.read_log(workload.namespace, name, tail_lines=tail)
        except errors.NotFound:
            return notices.Ephemeral(f"`{name}` is gone, and its output with it. Try: `/gpu status`")
        except errors.Invalid as err:  # the API server's own words: still ContainerCreating, image pull…
            return notices.Ephemeral(f"`{name}` has no output yet: {err.message}. Try again once it runs.")
        lines = tuple(output.splitlines())
        if not lines:
            return notices.Ephemeral(f"`{name}` ({workload.phase}) has printed nothing yet.")
        more = f" More: `{command} --tail N`" if len(lines) >= tail else ""
        return notices.Ephemeral(f"The last {len(lines)} lines of `{name}` ({workload.phase}):{more}", lines)

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
