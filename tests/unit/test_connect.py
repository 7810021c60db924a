"""How a thread tells its owner to reach a running workload: kubectl lines and a notebook's URL."""

from __future__ import annotations

import pytest

from bot.adapters import slack_render
from bot.core import connect, notices, workloads

TOKEN = "36561105e4ff1e78a40f3a76f48f0c89650caca5c209602c"
JUPYTER = [
    "[I 2025-09-03 18:17:27.667 ServerApp] Jupyter Server 2.14.1 is running at:",
    f"[I 2025-09-03 18:17:27.667 ServerApp] http://explore:8888/lab?token={TOKEN}",
    f"[I 2025-09-03 18:17:27.667 ServerApp]     http://127.0.0.1:8888/lab?token={TOKEN}",
]


def workload(ports: tuple[int, ...] = (), namespace: str = "ml") -> workloads.Workload:
    return workloads.Workload(
        name="explore",
        namespace=namespace,
        uid="u",
        owner_id="U1",
        requester_name="alice",
        profile="t4",
        channel="C1",
        thread_ts="1.0",
        lease_end=None,
        requested_at=None,
        gpus=1,
        phase="Running",
        node="n",
        command="",
        deletion_requested=False,
        ports=ports,
    )


def test_a_workload_without_ports_gets_a_shell_line_only() -> None:
    assert connect.connect_for(workload()) == notices.Connect(shell="kubectl exec -it -n ml explore -- sh")


def test_each_port_is_forwarded_to_the_same_port_here() -> None:
    lines = connect.connect_for(workload((8888, 6006)), "http://127.0.0.1:8888/lab?token=x")
    assert lines.forward == "kubectl port-forward -n ml pod/explore 8888:8888 6006:6006"
    assert lines.url == "http://127.0.0.1:8888/lab?token=x"


def test_the_url_is_jupyters_own_with_its_host_made_this_machines_loopback() -> None:
    assert connect.find_url(JUPYTER, [8888]) == f"http://127.0.0.1:8888/lab?token={TOKEN}"


@pytest.mark.parametrize(
    ("lines", "ports"),
    [
        (JUPYTER, [9999]),  # served on a port that is not forwarded
        (["TensorBoard 2.17.0 at http://localhost:6006/ (Press CTRL+C to quit)"], [6006]),  # no token
        (["see http://example.com:8888/?token=short"], [8888]),  # too short to be a token
        ([], [8888]),
    ],
)
def test_no_url_is_made_up(lines: list[str], ports: list[int]) -> None:
    assert connect.find_url(lines, ports) == ""


def test_names_with_shell_characters_are_quoted_so_the_line_runs_as_shown() -> None:
    odd = workload((8888,), namespace="team a")
    assert connect.connect_for(odd).forward == "kubectl port-forward -n 'team a' pod/explore 8888:8888"


def test_the_section_shows_each_line_whole_and_the_url_as_a_link() -> None:
    lines = connect.connect_for(workload((8888,)), f"http://127.0.0.1:8888/lab?token={TOKEN}")
    assert slack_render.connect_text(lines).splitlines() == [
        "*Connect* from your machine, with your cluster credentials:",
        "`kubectl port-forward -n ml pod/explore 8888:8888`",
        f"then open <http://127.0.0.1:8888/lab?token={TOKEN}>",
        "Shell: `kubectl exec -it -n ml explore -- sh`",
    ]


def test_with_nothing_to_forward_the_section_is_one_line() -> None:
    text = slack_render.connect_text(connect.connect_for(workload()))
    assert (
        text
        == "*Shell* from your machine, with your cluster credentials: `kubectl exec -it -n ml explore -- sh`"
    )
