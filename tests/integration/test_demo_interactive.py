"""`gpubot demo --interactive`: lines a person types drive the real bot on the demo's own environment."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot import cli_demo, cli_interactive
from bot.core import labels
from sim.slack.transcript import Json

pytestmark = pytest.mark.usefixtures("slack_env")

REPO = Path(__file__).resolve().parents[2]


def gpubot_pods(story: cli_demo.Story) -> list[Json]:
    return [
        p
        for p in story.sim.pods(story.bot.cluster.namespace)  # the demo runs in gpubot-workloads
        if p["metadata"]["labels"].get(labels.MANAGED_BY_LABEL) == labels.MANAGED_BY_VALUE
    ]


def release_number(listing: str) -> str:
    found = re.findall(r"^ +(\d+)\. \[Release GPU\]", listing, re.MULTILINE)
    assert len(found) == 1, listing
    return str(found[0])


def test_a_person_runs_a_gpu_then_releases_it_with_the_button() -> None:
    out = io.StringIO()
    with cli_demo.demo_environment(out) as story:
        session = cli_interactive.Session(story, out)
        session.run(io.StringIO(f"frobnicate\nwait soon\n/gpu {cli_demo.RUN}\nwait 7m\n"))
        (pod,) = gpubot_pods(story)
        assert pod["status"]["phase"] == "Running"
        assert story.headline("U_ALICE", "Running on gke-")()

        listing_starts = len(out.getvalue())
        session.run(io.StringIO("buttons\n"))
        number = release_number(out.getvalue()[listing_starts:])
        session.run(io.StringIO(f"click {number}\n/gpu status\nwait 1m\nquit\nas bob\n"))
        assert gpubot_pods(story) == []
        assert story.headline("U_ALICE", "Released")()
        assert story.ephemeral("U_ALICE", "Your workloads")()
        kinds = [(a["kind"], a["user"]) for a in story.slack.transcript()["actions"]]
        assert kinds == [("command", "U_ALICE"), ("click", "U_ALICE"), ("command", "U_ALICE")]

    text = out.getvalue()
    beats = [
        "alice> frobnicate\nhint: `frobnicate` is not something this demo knows",
        "alice> wait soon\nhint: `wait` takes a time like 90s, 5m or 1h30m",
        "** alice types `/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600` in #gpu-users",
        "** alice waits 7m",
        "*Running on gke-",
        "** waited 7m",
        "alice> buttons\n",
        f"  {number}. [Release GPU] on ",  # after Extend lease
        f"alice> click {number}\n",
        "** alice clicks [Release GPU] on ",
        'and confirms "Release gpu-u-alice-',
        "alice> /gpu status",
        "Your workloads",
        "*Released by its owner; its GPU is back in the pool*",
        "alice> quit",
    ]
    positions = [text.find(beat) for beat in beats]
    assert -1 not in positions, [b for b, p in zip(beats, positions, strict=True) if p == -1]
    assert positions == sorted(positions), text
    assert "as bob" not in text  # nothing is read after `quit`


def test_the_command_starts_the_prompt_and_exits_cleanly_at_end_of_input() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "demo", "--interactive"],
        input="as bob\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "/gpu run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600" in done.stdout
    assert "alice> as bob\n" in done.stdout
    assert "** you now type as bob" in done.stdout
    assert done.stdout.rstrip().endswith("you now type as bob"), done.stdout
    assert "Traceback" not in done.stderr


def test_a_person_opens_the_home_tab_sees_their_workload_and_spend_and_releases_from_it() -> None:
    out = io.StringIO()
    with cli_demo.demo_environment(out) as story:
        session = cli_interactive.Session(story, out)
        session.run(io.StringIO(f"home\n/gpu {cli_demo.RUN}\nwait 7m\nwait 20m\nhome\n"))
        (pod,) = gpubot_pods(story)
        listing_starts = len(out.getvalue())
        session.run(io.StringIO("buttons\n"))
        listing = out.getvalue()[listing_starts:]
        found = re.findall(r"^ +(\d+)\. \[Release GPU\] on the Home tab, for (\S+)$", listing, re.MULTILINE)
        assert found == [(found[0][0], pod["metadata"]["name"])], listing
        session.run(io.StringIO(f"click {found[0][0]}\nwait 1m\nhome\n"))
        assert gpubot_pods(story) == []

    text = out.getvalue()
    name = pod["metadata"]["name"]
    first_home, second_home = text.split("** alice opens gpubot's Home tab")[1:3]
    assert "  | None running. Start one with `/gpu run IMAGE`." in first_home
    assert "  | This week, since Monday " in first_home and "(UTC): nothing yet" in first_home
    assert f"  | • `{name}` — Running, on gke-" in second_home, second_home
    week = re.search(
        r"  \| This week, since Monday \d+ \w+ \(UTC\): \$\d+\.\d\d · (\d+\.\d) GPU-hours", second_home
    )
    assert week and float(week[1]) >= 0.3, second_home  # 20 minutes and more on its GPU
    assert "  | [Extend lease] (primary) [Release GPU] (danger)" in second_home
    assert "  | • gpu-pool: 1 node(s) ready" in second_home or "GPUs 0 free, 1 used" in second_home
    assert f"** alice clicks [Release GPU] on the Home tab, for {name}" in text


def test_gpu_alone_opens_the_form_and_a_fixed_submission_starts_a_notebook_with_its_connect_lines() -> None:
    """The issue's check: the form opens, a mistake stays under its field, the fixed form starts the run,
    and a notebook's thread shows the forward line and the URL with the token."""
    out = io.StringIO()
    with cli_demo.demo_environment(out) as story:
        session = cli_interactive.Session(story, out)
        session.run(
            io.StringIO("submit hours=2\n/gpu\nsubmit hours=lots\nsubmit type=notebook image=\nwait 7m\n")
        )
        (pod,) = gpubot_pods(story)
        assert pod["spec"]["containers"][0]["image"].startswith("quay.io/jupyter/")
        assert story.shows("U_ALICE", "lab?token=")()
        assert story.slack.open_views() == []
    text = out.getvalue()
    beats = [
        "alice> submit hours=2\nhint: no form is open; `/gpu` alone opens the run form",
        "** a form opens for alice",
        "  | == Run on a GPU ==",
        "  |   (x) t4 · $0.54/h",
        "alice> submit hours=lots",
        "  | hours: `--hours` takes a number of hours",
        "hint: the form stays open",
        "** alice submits the form (type='notebook', image='')",
        "alice asked for 1 GPU (notebook): `quay.io/jupyter/",
        "kubectl port-forward -n gpubot-workloads pod/",
        "then open <http://127.0.0.1:8888/lab?token=",
    ]
    positions = [text.find(beat) for beat in beats]
    assert -1 not in positions, [b for b, p in zip(beats, positions, strict=True) if p == -1]
    assert positions == sorted(positions), text
