"""Core: how a person reaches their running workload: the kubectl lines, and a notebook's URL from its output.

Nothing here talks to the cluster. The commands are what the owner types on their own machine, with
their own cluster credentials; gpubot opens no tunnel, so it grants nobody access they did not have.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from urllib.parse import parse_qs, urlsplit, urlunsplit

from bot.core import notices, workloads

LOCAL_HOST = "127.0.0.1"
_TOKEN_URL = re.compile(r"https?://[^\s/?#]+:(\d{1,5})/[^\s]*[?&]token=[0-9A-Za-z_-]{8,}[^\s]*")
"""A URL carrying a login token on some port, as Jupyter Server prints its own ("Jupyter Server 2.14.1 is
running at: http://hostname:8888/lab?token=…", jupyter_server/serverapp.py, `display_url`)."""


def connect_for(workload: workloads.Workload, url: str = "") -> notices.Connect:
    """The lines a running workload's thread shows: a shell, its ports forwarded, and what to open."""
    namespace, name = workload.namespace, workload.name
    shell = shlex.join(["kubectl", "exec", "-it", "-n", namespace, name, "--", "sh"])
    if not workload.ports:
        return notices.Connect(shell=shell)
    pairs = [f"{port}:{port}" for port in workload.ports]
    forward = shlex.join(["kubectl", "port-forward", "-n", namespace, f"pod/{name}", *pairs])
    return notices.Connect(shell=shell, forward=forward, url=url)


def find_url(lines: Iterable[str], ports: Iterable[int]) -> str:
    """The first URL with a token on one of these ports, as it opens through `kubectl port-forward`
    (the same port on this machine's loopback); "" when the output holds none."""
    forwarded = set(ports)
    for line in lines:
        for match in _TOKEN_URL.finditer(line):
            if int(match[1]) in forwarded:
                return local_url(match[0], int(match[1]))
    return ""


def server_of(url: str) -> tuple[int, str]:
    """The port and login token of a notebook's URL as `find_url` gave it; (0, "") without a token."""
    parts = urlsplit(url)
    token = parse_qs(parts.query).get("token", [""])[0]
    try:
        port = parts.port or 0
    except ValueError:
        port = 0
    return (port, token) if port and token else (0, "")


def local_url(url: str, port: int) -> str:
    """The URL with its host swapped for this machine's loopback, where port-forward listens."""
    parts = urlsplit(url)
    return urlunsplit(("http", f"{LOCAL_HOST}:{port}", parts.path, parts.query, ""))
