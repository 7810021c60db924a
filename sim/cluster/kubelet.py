"""The simulated kubelets: pull, create, start, run and stop containers on the clock.

- What a container does is read from its command by `scripts`, deterministically: `sleep N`, `exit N`,
  `echo`/`printf` output (kept in `logs`, stamped when printed), memory growth (an OOM kill past the
  container's memory limit, or the node's allocatable memory without one); anything else runs until deleted.
- An image whose reference contains `notfound` fails to pull: ErrImagePull, then ImagePullBackOff.
- Pull time follows the image's size class: CUDA and ML framework images are large.
- A container that only sleeps, prints or runs shell builtins leaves its GPU idle; a real command keeps it
  busy.
- Each container instance gets its own container ID; its log is kept under that ID, the current and the
  previous instance's, which is what `--previous` reads.
"""

from __future__ import annotations

import functools
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from sim.cluster import containers, ephemeral, events, fit, logs, messages, scripts
from sim.cluster.config import Timings, doubling
from sim.cluster.store import Change, Obj, Store, rfc3339

logger = logging.getLogger(__name__)

LARGE_IMAGE_HINTS = ("cuda", "pytorch", "tensorflow", "nvcr.io", "jax", "triton", "vllm")
SMALL_IMAGE_HINTS = ("busybox", "alpine", "pause", "hello-world", "debian", "ubuntu")
IMAGE_SIZES = {"small": 4_300_000, "medium": 180_000_000, "large": 3_900_000_000}
FAILING_IMAGE_MARK = "notfound"


def size_class(image: str) -> str:
    lowered = image.lower()
    if any(h in lowered for h in LARGE_IMAGE_HINTS):
        return "large"
    if any(h in lowered for h in SMALL_IMAGE_HINTS):
        return "small"
    return "medium"


@dataclass
class PodRun:
    """The kubelet's private state for one pod it is running."""

    uid: str
    node: str
    container_started: dict[str, float] = field(default_factory=dict)
    pull_failures: int = 0
    restarts: int = 0
    crashes: int = 0
    stopping: bool = False
    timers: list[Any] = field(default_factory=list)
    ephemeral: set[str] = field(default_factory=set)
    """Ephemeral containers being pulled and started."""


class Kubelets:
    """One kubelet per node, folded into one controller since they share the clock and the store."""

    def __init__(
        self, store: Store, recorder: events.Recorder, timings: Timings, kept: logs.LogStore | None = None
    ) -> None:
        self.store, self.recorder, self.timings = store, recorder, timings
        self.logs = kept or logs.LogStore()
        self.clock = store.clock
        self.runs: dict[str, PodRun] = {}
        self.images: dict[str, set[str]] = {}
        self._next_ip = 2
        store.subscribe(self._on_change)

    def gpu_busy(self, pod: Obj) -> bool | None:
        """Whether the pod's GPU is in use right now; None when it is not running."""
        if pod.get("status", {}).get("phase") != "Running":
            return None
        return any(containers.behaviour(c).uses_gpu for c in pod["spec"].get("containers", []))

    # -- reacting ----------------------------------------------------------------------------
    def _on_change(self, change: Change) -> None:
        if change.resource != "pods":
            return
        pod = change.obj
        uid = pod["metadata"]["uid"]
        if change.type == "DELETED":
            run = self.runs.pop(uid, None)
            if run:
                for timer in run.timers:
                    timer.cancel()
            self.logs.forget(uid)
            return
        node = pod["spec"].get("nodeName")
        if not node:
            return
        if uid not in self.runs and not pod["metadata"].get("deletionTimestamp"):
            if pod["status"].get("phase") in ("Succeeded", "Failed"):
                return
            run = PodRun(uid, node)
            self.runs[uid] = run
            self._later(run, 0.0, lambda: self._start_pod(pod))
        elif pod["status"].get("phase") == "Running" and ephemeral.unstarted(pod):
            self._later(self.runs[uid], 0.0, lambda: self._start_ephemeral(pod))
        elif pod["metadata"].get("deletionTimestamp"):
            run = self.runs.get(uid) or PodRun(uid, node)
            self.runs[uid] = run
            if not run.stopping:
                run.stopping = True
                self._later(run, 0.0, lambda: self._stop_pod(pod), keep=False)

    def _later(self, run: PodRun, delay: float, step: Any, *, keep: bool = True) -> None:
        timer = self.clock.call_later(delay, step)
        if keep:
            run.timers.append(timer)

    def _current(self, pod: Obj) -> Obj | None:
        current = self.store.get("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
            return None
        return current

    # -- start-up ----------------------------------------------------------------------------
    def _start_pod(self, pod: Obj) -> None:
        pod = self._current(pod) or {}
        if not pod or pod["metadata"].get("deletionTimestamp"):
            return
        self._next_ip += 1
        ip = f"10.8.{self._next_ip // 250}.{self._next_ip % 250 + 2}"
        node = pod["spec"]["nodeName"]
        host_ip = self._host_ip(node)
        now = rfc3339(self.clock)

        def init(p: Obj) -> None:
            status = p["status"]
            status.update(
                hostIP=host_ip, hostIPs=[{"ip": host_ip}], podIP=ip, podIPs=[{"ip": ip}], startTime=now
            )
            names = [c["name"] for c in p["spec"]["containers"]]
            status["conditions"] = [
                c for c in status.get("conditions", []) if c["type"] == "PodScheduled"
            ] + [
                containers.condition("PodReadyToStartContainers", "True", now),
                containers.condition("Initialized", "True", now),
                containers.condition(
                    "Ready", "False", now, "ContainersNotReady", messages.containers_not_ready(names)
                ),
                containers.condition(
                    "ContainersReady",
                    "False",
                    now,
                    "ContainersNotReady",
                    messages.containers_not_ready(names),
                ),
            ]
            status["containerStatuses"] = [
                containers.waiting(c, "ContainerCreating") for c in p["spec"]["containers"]
            ]

        pod = self.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], init) or pod
        self._pull(pod)

    def _host_ip(self, node_name: str) -> str:
        node = self.store.get("nodes", "", node_name) or {}
        for address in node.get("status", {}).get("addresses", []):
            if address.get("type") == "InternalIP":
                return str(address["address"])
        return "10.128.0.1"

    def _pull(self, pod: Obj) -> None:
        run = self.runs.get(pod["metadata"]["uid"])
        if run is None:
            return
        container = pod["spec"]["containers"][0]
        image, node = container["image"], run.node
        present = image in self.images.get(node, set())
        if present and container.get("imagePullPolicy") != "Always":
            self._event(pod, "Normal", "Pulled", messages.already_present(image))
            self._later(run, 0.5, lambda: self._create_and_start(pod))
            return
        self._event(pod, "Normal", "Pulling", messages.pulling(image))
        klass = size_class(image)
        took = {
            "small": self.timings.pull_small,
            "medium": self.timings.pull_medium,
            "large": self.timings.pull_large,
        }[klass]
        if FAILING_IMAGE_MARK in image.lower():
            self._later(run, min(took, 3.0), lambda: self._pull_failed(pod))
            return

        def pulled() -> None:
            self.images.setdefault(node, set()).add(image)
            self._event(pod, "Normal", "Pulled", messages.pulled(image, took, IMAGE_SIZES[klass]))
            self._create_and_start(pod)

        self._later(run, took, pulled)

    def _pull_failed(self, pod: Obj) -> None:
        run = self.runs.get(pod["metadata"]["uid"])
        current = self._current(pod)
        if run is None or current is None or current["metadata"].get("deletionTimestamp"):
            return
        image = current["spec"]["containers"][0]["image"]
        detail = messages.pull_not_found_detail(image)
        run.pull_failures += 1
        self._event(current, "Warning", "Failed", messages.pull_failed(image, detail))
        self._event(current, "Warning", "Failed", messages.ERR_IMAGE_PULL)
        self._set_waiting(current, "ErrImagePull", detail)
        backoff = doubling(
            self.timings.crash_backoff_initial, self.timings.crash_backoff_max, run.pull_failures - 1
        )

        def back_off() -> None:
            now_pod = self._current(pod)
            if now_pod is None:
                return
            self._event(now_pod, "Normal", "BackOff", messages.back_off_pulling(image))
            self._event(now_pod, "Warning", "Failed", messages.IMAGE_PULL_BACKOFF)
            self._set_waiting(now_pod, "ImagePullBackOff", messages.back_off_pulling_waiting(image, detail))
            self._later(run, backoff, lambda: self._pull(now_pod))

        self._later(run, 1.0, back_off)

    def _set_waiting(self, pod: Obj, reason: str, message: str) -> None:
        def waiting(p: Obj) -> None:
            for status in p["status"].get("containerStatuses", []):
                status["state"] = {"waiting": {"reason": reason, "message": message}}

        self.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], waiting)

    def _create_and_start(self, pod: Obj) -> None:
        run = self.runs.get(pod["metadata"]["uid"])
        current = self._current(pod)
        if run is None or current is None or current["metadata"].get("deletionTimestamp"):
            return
        for container in current["spec"]["containers"]:
            self._event(current, "Normal", "Created", messages.created_container(container["name"]))
            self._event(current, "Normal", "Started", messages.started_container(container["name"]))
        now = rfc3339(self.clock)

        def running(p: Obj) -> None:
            p["status"]["phase"] = "Running"
            for c in p["status"]["conditions"]:
                if c["type"] in ("Ready", "ContainersReady"):
                    c.update(status="True", lastTransitionTime=now)
                    c.pop("reason", None)
                    c.pop("message", None)
            p["status"]["containerStatuses"] = [
                containers.running(c, now, run.restarts, s, uid=run.uid)
                for c, s in zip(
                    p["spec"]["containers"], p["status"].get("containerStatuses", []), strict=False
                )
            ]

        current = self.store.mutate(
            "pods", current["metadata"]["namespace"], current["metadata"]["name"], running
        )
        if current is None:
            return
        self._play(run, current, self.clock.now())
        first = self._behaviour(current, current["spec"]["containers"][0])
        if first.runs_for is not None:
            self._later(run, first.runs_for, lambda: self._exited(current, first))

    def _start_ephemeral(self, pod: Obj) -> None:
        """`kubectl debug` added containers: pull (the debug images are small), create, start."""
        current = self._current(pod)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return
        run = self.runs.get(current["metadata"]["uid"])
        if run is None:
            return
        for container in ephemeral.unstarted(current):
            if container["name"] not in run.ephemeral:
                run.ephemeral.add(container["name"])
                self._event(current, "Normal", "Pulling", messages.pulling(container["image"]))
                took = self.timings.pull_small
                self._later(run, took, functools.partial(self._ephemeral_pulled, current, container, took))

    def _ephemeral_pulled(self, pod: Obj, container: Obj, took: float) -> None:
        current = self._current(pod)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return
        size = IMAGE_SIZES["small"]
        self._event(current, "Normal", "Pulled", messages.pulled(container["image"], took, size))
        self._event(current, "Normal", "Created", messages.created_container(container["name"]))
        self._event(current, "Normal", "Started", messages.started_container(container["name"]))
        status = containers.running(container, rfc3339(self.clock), 0, {}, uid=current["metadata"]["uid"])
        # ephemeral containers are never ready and never restarted (EphemeralContainerCommon)
        entry = {**status, "ready": False, "started": False, "lastState": {}}
        meta = current["metadata"]
        self.store.mutate(
            "pods",
            meta["namespace"],
            meta["name"],
            lambda p: p["status"].setdefault("ephemeralContainerStatuses", []).append(entry),
        )

    def _behaviour(self, pod: Obj, container: Obj) -> containers.Behaviour:
        """The container's behaviour on its node: memory is capped by its limit, else by what the node
        can allocate (the kubepods cgroup), so unbounded growth ends in an OOM kill either way."""
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit is None:
            node = self.store.get("nodes", "", pod["spec"].get("nodeName", "")) or {}
            limit = node.get("status", {}).get("allocatable", {}).get("memory")
        cap = float(fit.parse_quantity(limit)) if limit is not None else None
        return containers.behaviour(container, memory_cap=cap, growth_rate=self.timings.memory_growth_rate)

    def _play(self, run: PodRun, pod: Obj, started: float) -> None:
        """Each running container prints its program's output on the clock, into its instance's log; lines
        due before now (a restart from saved state) are written at once with the times they were due."""
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses", [])}
        for container in pod["spec"]["containers"]:
            status = statuses.get(container["name"], {})
            if "running" not in status.get("state", {}):
                continue
            log = self.logs.open(run.uid, container["name"], status["containerID"])
            chunks = scripts.read(
                container,
                hostname=pod["metadata"]["name"],
                seed=run.uid,
                started=self.clock.to_datetime(started),
            ).chunks
            for at, batch in itertools.groupby(chunks, key=lambda c: c.at):
                print_batch = functools.partial(containers.print_chunks, log, started + at, list(batch))
                if started + at <= self.clock.now():
                    print_batch()
                else:
                    self._later(run, started + at - self.clock.now(), print_batch)

    def _close_logs(self, pod: Obj) -> None:
        for status in pod["status"].get("containerStatuses", []):
            if status.get("containerID"):
                self.logs.close(status["containerID"])

    def resume(self) -> None:
        """After a restart from saved state: pick up every pod a kubelet was looking after."""
        for pod in self.store.items("pods"):
            node = pod["spec"].get("nodeName")
            if not node or pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            run = self.runs.setdefault(pod["metadata"]["uid"], PodRun(pod["metadata"]["uid"], node))
            statuses = pod["status"].get("containerStatuses") or [{}]
            run.restarts = max(int(s.get("restartCount", 0)) for s in statuses)  # new instances, new IDs
            if pod["metadata"].get("deletionTimestamp"):
                run.stopping = True
                self._later(run, 0.0, functools.partial(self._stop_pod, pod), keep=False)
            elif pod["status"].get("phase") == "Running":
                self._resume_running(run, pod)
            else:
                self._later(run, 0.0, functools.partial(self._start_pod, pod))

    def _resume_running(self, run: PodRun, pod: Obj) -> None:
        started = self.clock.from_stamp(containers.started_at(pod))
        self._play(run, pod, started)
        first = self._behaviour(pod, pod["spec"]["containers"][0])
        if first.runs_for is None:
            return
        left = max(started + first.runs_for - self.clock.now(), 0.0)
        self._later(run, left, lambda: self._exited(pod, first))

    # -- exits and restarts ------------------------------------------------------------------
    def _exited(self, pod: Obj, outcome: containers.Behaviour) -> None:
        run = self.runs.get(pod["metadata"]["uid"])
        current = self._current(pod)
        if run is None or current is None or current["metadata"].get("deletionTimestamp"):
            return
        self._close_logs(current)
        policy = current["spec"].get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and outcome.exit_code != 0)
        now = rfc3339(self.clock)
        terminated = {
            "exitCode": outcome.exit_code,
            "reason": outcome.reason,
            "startedAt": containers.started_at(current),
            "finishedAt": now,
        }
        if not restart:
            self._finish(current, terminated)
            return
        # kubelet doBackOff: the first crash restarts at once; later ones wait 10 s, doubling to 5 min.
        run.crashes += 1
        backoff = 0.0
        if run.crashes > 1:
            backoff = doubling(
                self.timings.crash_backoff_initial, self.timings.crash_backoff_max, run.crashes - 2
            )
        name = current["spec"]["containers"][0]["name"]
        meta = current["metadata"]
        waiting = {
            "reason": "CrashLoopBackOff",
            "message": messages.crash_loop_waiting(
                backoff, name, meta["name"], meta["namespace"], meta["uid"]
            ),
        }

        def crashed(p: Obj) -> None:
            p["status"]["phase"] = "Running"
            for c in p["status"]["conditions"]:
                if c["type"] in ("Ready", "ContainersReady"):
                    c.update(
                        status="False",
                        reason=messages.CONTAINERS_NOT_READY,
                        message=messages.containers_not_ready([name]),
                        lastTransitionTime=now,
                    )
            for status in p["status"]["containerStatuses"]:
                status.update(ready=False, started=False)
                ended = containers.terminated(status, terminated)
                if backoff:
                    status.update(lastState={"terminated": ended}, state={"waiting": waiting})
                else:
                    status.update(state={"terminated": ended})

        current = self.store.mutate("pods", meta["namespace"], meta["name"], crashed) or current
        if backoff:
            self._event(
                current,
                "Warning",
                "BackOff",
                messages.back_off_restarting(name, meta["name"], meta["namespace"], meta["uid"]),
            )

        def start_again() -> None:
            run.restarts += 1
            self._create_and_start(current)

        self._later(run, backoff or self.timings.pleg_relist, start_again)

    def _finish(self, pod: Obj, terminated: dict[str, Any]) -> None:
        phase = "Succeeded" if terminated["exitCode"] == 0 else "Failed"
        now = rfc3339(self.clock)

        def finish(p: Obj) -> None:
            p["status"]["phase"] = phase
            for c in p["status"]["conditions"]:
                if c["type"] in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                    c.update(status="False", lastTransitionTime=now)
                    if c["type"] != "PodReadyToStartContainers":
                        # pkg/kubelet/status/generate.go generate*ConditionForTerminalPhase
                        c.update(
                            reason=messages.POD_COMPLETED if phase == "Succeeded" else messages.POD_FAILED
                        )
            for status in p["status"]["containerStatuses"]:
                ended = containers.terminated(status, terminated)
                status.update(ready=False, started=False, state={"terminated": ended})

        self.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], finish)
        self.runs.pop(pod["metadata"]["uid"], None)

    # -- deletion ----------------------------------------------------------------------------
    def _stop_pod(self, pod: Obj) -> None:
        current = self._current(pod)
        if current is None:
            return
        run = self.runs.get(current["metadata"]["uid"])
        if run:
            for timer in run.timers:
                timer.cancel()
            run.timers.clear()
        grace = float(current["metadata"].get("deletionGracePeriodSeconds", 30))
        was_running = current["status"].get("phase") == "Running"
        slowest = 0.0
        for container in current["spec"]["containers"]:
            if was_running:
                self._event(current, "Normal", "Killing", messages.stopping_container(container["name"]))
                slowest = max(
                    slowest,
                    grace if containers.behaviour(container).ignores_sigterm else self.timings.sigterm_exit,
                )
        self.clock.call_later(min(slowest, grace), lambda: self._remove(current))

    def _remove(self, pod: Obj) -> None:
        current = self._current(pod)
        if current is not None:
            self.store.remove("pods", current["metadata"]["namespace"], current["metadata"]["name"])

    def _event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        node = pod["spec"].get("nodeName", "")
        self.recorder.record(pod, type_, reason, message, component=messages.KUBELET, host=node)
