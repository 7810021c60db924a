"""A container as the kubelet reports it: its behaviour on the clock and its status records.

`behaviour` reads the command through `scripts` and adds what the node decides: the OOM kill when memory
outgrows its cap. The status builders write containerStatuses as kubelet does, each instance under its own
container ID, which names its log and what `--previous` reads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sim.cluster import logs, scripts
from sim.cluster.store import Obj

OOM_EXIT_CODE = 137
"""128 + SIGKILL, what containerd reports for a container the OOM killer ended."""


@dataclass(frozen=True)
class Behaviour:
    """What a container will do once started."""

    runs_for: float | None
    """Seconds until exit; None runs until the pod is deleted."""
    exit_code: int = 0
    ignores_sigterm: bool = False
    uses_gpu: bool = True
    oom_killed: bool = False
    """It exits because its memory outgrew its cap: reason OOMKilled, exit code 137."""

    @property
    def reason(self) -> str:
        if self.oom_killed:
            return "OOMKilled"
        return "Completed" if self.exit_code == 0 else "Error"


def behaviour(container: Obj, *, memory_cap: float | None = None, growth_rate: float = 1.0) -> Behaviour:
    """The container's command read by `scripts`; with a memory cap (bytes), growth past it is an OOM kill
    `cap / growth_rate` seconds after the growth starts, as the kernel's cgroup OOM killer does."""
    program = scripts.read(container)
    growth = program.growth
    if memory_cap is not None and growth is not None and growth.bytes > memory_cap:
        killed_at = growth.at + memory_cap / growth_rate
        if program.ends_at is None or killed_at < program.ends_at:
            return Behaviour(killed_at, OOM_EXIT_CODE, program.ignores_sigterm, program.busy, oom_killed=True)
    return Behaviour(program.ends_at, program.exit_code, program.ignores_sigterm, program.busy)


def condition(type_: str, status: str, now: str, reason: str = "", message: str = "") -> Obj:
    out: Obj = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def waiting(container: Obj, reason: str) -> Obj:
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"waiting": {"reason": reason}},
        "lastState": {},
    }


def print_chunks(log: logs.ContainerLog, at: float, chunks: list[scripts.Chunk]) -> None:
    for chunk in chunks:
        log.write(at, chunk.stream, chunk.text)


def terminated(status: Obj, ended: Obj) -> Obj:
    """The terminated state names the container instance that ended, as kubelet's does."""
    return {"containerID": status["containerID"], **ended} if status.get("containerID") else ended


def running(container: Obj, now: str, restarts: int, previous: Obj, *, uid: str) -> Obj:
    digest = "sha256:" + format(abs(hash(container["image"])), "x").rjust(64, "0")[:64]
    instance = hashlib.sha256(f"{uid}/{container['name']}/{restarts}".encode()).hexdigest()
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": f"{container['image']}@{digest}",
        "containerID": f"containerd://{instance}",
        "ready": True,
        "restartCount": restarts,
        "started": True,
        "state": {"running": {"startedAt": now}},
        "lastState": previous["state"]
        if "terminated" in previous.get("state", {})
        else previous.get("lastState", {}),
    }


def started_at(pod: Obj) -> str:
    for status in pod["status"].get("containerStatuses", []):
        started = status.get("state", {}).get("running", {}).get("startedAt")
        if started:
            return str(started)
    return "1970-01-01T00:00:00Z"
