"""What well-known images do when run with no command: their own entrypoint, as far as it shows in a log.

Only Jupyter's docker-stacks images (`quay.io/jupyter/*-notebook`, formerly `jupyter/*-notebook` on Docker
Hub) are modelled: their `start-notebook.py` starts Jupyter Server, which prints where it listens with a
login token. The lines follow jupyter/docker-stacks' documented run of `quay.io/jupyter/scipy-notebook`
(docs/using/running.md: "Entered start.sh with args: jupyter lab" … "Or copy and paste one of these URLs")
and jupyter_server/serverapp.py 2.14 (`running_server_info`, `display_url`, the `log.critical` banner),
whose log format is `[%(levelname)1.1s %(asctime)s.%(msecs).03d %(name)s]`. Any other image with no command
is a real workload that prints nothing. A server waits for its browser: it never exits by itself, and
keeps its GPU idle until a kernel uses it.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

JUPYTER_IMAGE = re.compile(r"(?:^|/)jupyter/[a-z0-9-]+-notebook(?::|@|$)")
PORT = 8888
"""Jupyter Server's default port (ServerApp.port)."""
TOKEN_HEX = 48
"""ServerApp's generated token: `binascii.hexlify(os.urandom(24))`, 48 hex digits."""
STARTUP_SECONDS = 4.0
"""From the container's start to the server listening: start.sh's hooks, then the extensions load."""


def is_jupyter(image: str) -> bool:
    return JUPYTER_IMAGE.search(image) is not None


def token(seed: str) -> str:
    """A token per pod, fixed by its uid so a restarted sim reprints the same log."""
    return hashlib.sha256(f"jupyter-token:{seed}".encode()).hexdigest()[:TOKEN_HEX]


def jupyter_log(*, hostname: str, seed: str, started: datetime | None) -> list[tuple[float, str]]:
    """The server's start-up lines, each with its seconds after the container started."""
    secret = token(seed)
    at = STARTUP_SECONDS
    stamp = _stamper(started, at)
    urls = [
        f"http://{hostname or 'localhost'}:{PORT}/lab?token={secret}",
        f"http://127.0.0.1:{PORT}/lab?token={secret}",
    ]
    return [
        (0.0, "Entered start.sh with args: jupyter lab"),
        (0.1, "Running hooks in: /usr/local/bin/start-notebook.d as uid: 1000 gid: 100"),
        (0.1, "Done running hooks in: /usr/local/bin/start-notebook.d"),
        (0.2, "Running hooks in: /usr/local/bin/before-notebook.d as uid: 1000 gid: 100"),
        (0.2, "Done running hooks in: /usr/local/bin/before-notebook.d"),
        (0.3, "Executing the command: jupyter lab"),
        (at, f"[I {stamp} ServerApp] Serving notebooks from local directory: /home/jovyan"),
        (at, f"[I {stamp} ServerApp] Jupyter Server 2.14.1 is running at:"),
        (at, f"[I {stamp} ServerApp] {urls[0]}"),
        (at, f"[I {stamp} ServerApp]     {urls[1]}"),
        (
            at,
            f"[I {stamp} ServerApp] Use Control-C to stop this server and shut down all kernels"
            " (twice to skip confirmation).",
        ),
        (at, f"[C {stamp} ServerApp]"),
        (at, "    To access the server, open this file in a browser:"),
        (at, "        file:///home/jovyan/.local/share/jupyter/runtime/jpserver-7-open.html"),
        (at, "    Or copy and paste one of these URLs:"),
        (at, f"        {urls[0]}"),
        (at, f"        {urls[1]}"),
    ]


def _stamper(started: datetime | None, at: float) -> str:
    """`%Y-%m-%d %H:%M:%S.mmm` as Python's logging prints asctime with msecs; the sim's own time."""
    if started is None:
        return "0000-00-00 00:00:00.000"
    moment = started + timedelta(seconds=at)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
