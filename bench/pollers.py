"""The baselines gpubot's watch-driven design is measured against: honest pollers, as one would write them.

`PhaseNotifier` (P2) lists its pods every 5 s and edits each pod's thread root when its phase changed.
`PodPoller` (P3) reads every tracked pod with its own GET every 5 s. Both use the official client and
slack_sdk, name themselves in User-Agent, and run on their own thread until stopped.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client
from slack_sdk import WebClient

from bot.core import labels

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 5.0
NOTIFIER_AGENT = "gpubot-bench/phase-notifier"
POD_POLLER_AGENT = "gpubot-bench/pod-poller"


def api_for(url: str, agent: str, *, connections: int = 4) -> client.ApiClient:
    configuration = client.Configuration(host=url)
    configuration.connection_pool_maxsize = connections
    api = client.ApiClient(configuration)
    api.user_agent = agent
    return api


class Poller:
    """Calls `round()` every `interval` seconds on a thread of its own; a slow round delays the next."""

    def __init__(self, interval: float = INTERVAL_SECONDS) -> None:
        self.interval = interval
        self.rounds = 0
        self.late_rounds = 0
        """Rounds that took longer than the interval: the poller could not keep its own schedule."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def round(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.round()
            except Exception:  # a baseline that dies quietly would flatter gpubot; say so and go on
                logger.exception("%s round failed", type(self).__name__)
            self.rounds += 1
            next_at += self.interval
            wait = next_at - time.monotonic()
            if wait < 0:
                self.late_rounds += 1
                next_at = time.monotonic()
            self._stop.wait(max(wait, 0.0))


class PhaseNotifier(Poller):
    """Lists pods labelled `bench=<role>` every 5 s; a changed phase edits the pod's thread root.

    The root comes from the same channel and thread annotations gpubot writes on its own pods."""

    def __init__(self, url: str, slack: WebClient, *, role: str, interval: float = INTERVAL_SECONDS) -> None:
        super().__init__(interval)
        self.core = client.CoreV1Api(api_for(url, NOTIFIER_AGENT))
        self.slack = slack
        self.selector = f"bench={role}"
        self.phases: dict[str, str] = {}

    def round(self) -> None:
        listed: Any = self.core.list_namespaced_pod(
            "default", label_selector=self.selector, _preload_content=False
        )
        for pod in json.loads(listed.data)["items"]:
            name, phase = pod["metadata"]["name"], pod.get("status", {}).get("phase", "Pending")
            if self.phases.get(name) == phase:
                continue
            self.phases[name] = phase
            notes = pod["metadata"].get("annotations") or {}
            channel, ts = notes.get(labels.CHANNEL_ANNOTATION), notes.get(labels.THREAD_TS_ANNOTATION)
            if channel and ts:
                node = pod.get("spec", {}).get("nodeName") or "no node yet"
                self.slack.chat_update(channel=channel, ts=ts, text=f"{name}: {phase} on {node}")


class PodPoller(Poller):
    """One GET per tracked pod every 5 s, a few in parallel: per-pod polling, done reasonably."""

    def __init__(self, url: str, names: Iterable[str], *, interval: float = INTERVAL_SECONDS) -> None:
        super().__init__(interval)
        self.core = client.CoreV1Api(api_for(url, POD_POLLER_AGENT, connections=8))
        self.names = list(names)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pod-poller")

    def round(self) -> None:
        list(self._pool.map(self._read, self.names))

    def _read(self, name: str) -> None:
        response: Any = self.core.read_namespaced_pod(name, "default", _preload_content=False)
        json.loads(response.data)  # read and decoded, as a poller that looks at the pod must
        response.release_conn()

    def stop(self) -> None:
        super().stop()
        self._pool.shutdown(wait=True)
