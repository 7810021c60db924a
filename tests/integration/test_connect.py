"""Reaching a running workload: the thread's Connect section, its kubectl lines and a notebook's URL.

Against the real bot, the sim (whose kubelet prints a Jupyter docker-stacks image's start-up log with its
token) and the Slack emulator; the lines the thread gives are run with the real kubectl against the sim.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bot import runtime
from sim.cluster import entrypoints, world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, Json, advance_until, roots

pytestmark = pytest.mark.usefixtures("slack_env")

NOTEBOOK = "run --type notebook --name explore"
PORTS = f"run {CUDA} --name board --port 6006 --port 8080 -- sleep 3600"


def connect_section(root: Json) -> str:
    return next((b["text"]["text"] for b in root["blocks"] if b.get("block_id") == "gpubot_connect"), "")


def root_named(slack: BackgroundSlack, name: str) -> Json | None:
    return next((r for r in roots(slack) if f"/{name}`" in str(r["blocks"])), None)


def started(sim: world.BackgroundWorld, slack: BackgroundSlack, text: str, name: str, words: str) -> Json:
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", text).acked
    return advance_until(
        sim, slack, lambda: (r := root_named(slack, name)) is not None and words in connect_section(r) and r
    )


def test_a_notebook_run_shows_the_forward_line_and_the_url_with_the_token_its_server_printed(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = started(sim, slack, NOTEBOOK, "explore", "token=")
    section = connect_section(root)
    uid = sim.run(lambda: sim.world.store.get("pods", "default", "explore")["metadata"]["uid"])
    assert "`kubectl port-forward -n default pod/explore 8888:8888`" in section
    assert f"<http://127.0.0.1:8888/lab?token={entrypoints.token(uid)}>" in section, section
    assert "`kubectl exec -it -n default explore -- sh`" in section
    assert "quay.io/jupyter/pytorch-notebook" in str(root["blocks"]), "the profile's image was used"


def test_ports_named_with_port_are_forwarded_and_no_url_is_made_up(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = started(sim, slack, PORTS, "board", "port-forward")
    section = connect_section(root)
    assert "`kubectl port-forward -n default pod/board 6006:6006 8080:8080`" in section
    assert "then open" not in section, "its output holds no URL, so none is shown"
    pod = sim.run(lambda: sim.world.store.get("pods", "default", "board"))
    assert pod["spec"]["containers"][0]["ports"] == [
        {"containerPort": 6006, "protocol": "TCP"},
        {"containerPort": 8080, "protocol": "TCP"},
    ]


def test_the_connect_section_goes_when_the_run_is_over(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    root = started(sim, slack, PORTS, "board", "port-forward")
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", "release board").acked
    over = advance_until(
        sim, slack, lambda: (r := root_named(slack, "board")) is not None and "Released" in r["text"] and r
    )
    assert root["ts"] == over["ts"]
    assert connect_section(over) == ""


def test_bad_ports_are_refused_and_start_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    for text, words in (
        (f"run {CUDA} --port 0", "from 1 to 65535, not '0'"),
        (f"run {CUDA} --port 8888,x", "from 1 to 65535, not 'x'"),
        (f"run {CUDA} --port {','.join(str(p) for p in range(8000, 8009))}", "at most 8 ports"),
        ("run --type t4", "the `t4` type has none of its own"),
    ):
        answer = slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
        assert answer.acked
        shown = slack.wait_until(lambda w=words: [e for e in slack.ephemerals("U_ALICE") if w in e["text"]])
        assert shown, text
    assert roots(slack) == []
    assert sim.run(lambda: list(sim.world.store.items("pods", "default"))) == []


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_the_lines_the_thread_gives_reach_the_api_server_which_answers_as_a_real_one_would(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, tmp_path: Path
) -> None:
    """The sim runs no processes: its kubelets refuse streams, as an unreachable kubelet does."""
    root = started(sim, slack, NOTEBOOK, "explore", "token=")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    for line in re.findall(r"`(kubectl [^`]+)`", connect_section(root)):
        argv = shlex.split(line)
        if argv[1] == "exec":
            argv = [*argv[:2], *[a for a in argv[2:] if a != "-it"]]  # no terminal here
        done = subprocess.run(
            [str(KUBECTL), f"--kubeconfig={kubeconfig}", *argv[1:]],
            capture_output=True,
            text=True,
            timeout=WAIT,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode != 0
        assert "error dialing backend: dial tcp 10.128." in done.stderr, done.stderr
        assert ":10250: connect: connection refused" in done.stderr
