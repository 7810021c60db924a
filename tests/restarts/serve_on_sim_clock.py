"""`gpubot serve`, with one difference: the bot's clock is the simulated cluster's, read over HTTP.

Run as `python -m tests.restarts.serve_on_sim_clock` with the environment `gpubot serve` reads, plus
`GPUBOT_SIM_URL`. The sim's manual clock moves only when a test advances it, so leases, reminders and
scale episodes happen on one timeline, as they do in `gpubot demo` where the bot shares the sim's clock
in-process. Everything else (settings, wiring, Socket Mode, signals) is `bot.cli.serve.serve` itself.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from datetime import datetime

from bot import settings
from bot.cli import serve

CACHE_SECONDS = 0.02
"""Real seconds one reading is reused: the bot asks the time many times per event it handles."""


class SimClock:
    """The sim's `/simctl/v1/clock` as a `Callable[[], datetime]`."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/simctl/v1/clock"
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._last: datetime | None = None

    def __call__(self) -> datetime:
        with self._lock:
            if self._last is None or time.monotonic() - self._read_at > CACHE_SECONDS:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    self._last = datetime.fromisoformat(json.load(response)["time"])
                self._read_at = time.monotonic()
            return self._last


def main() -> int:
    return serve.serve(settings.Settings.from_env(), clock=SimClock(os.environ["GPUBOT_SIM_URL"]))


if __name__ == "__main__":
    raise SystemExit(main())
