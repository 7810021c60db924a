"""A notebook is idle only when its GPU is and its Jupyter's kernels are: the real bot reads the sim's Jupyter
Server through the API server's pod proxy, with the token its log printed. Rounds are driven by the test."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client

from bot import runtime
from bot.core import labels, notebooks
from sim.cluster import jupyter, world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import WAIT, Json, advance_until, gpubot_pods, roots
from tests.integration.test_connect import connect_section
from tests.integration.test_reaper import caught_up, pod_notes, reap_until, reaping_bot, said

pytestmark = pytest.mark.usefixtures("slack_env")

WINDOW = 10.0
"""The idle window, minutes."""


def start_notebook(sim: world.BackgroundWorld, slack: BackgroundSlack, text: str) -> Json:
    """A notebook run, Running; with its Jupyter's URL in the thread when its log shows one."""
    assert slack.type_command("U_ALICE", "C_GPU", "/gpu", text).acked
    root: Json = slack.wait_until(lambda: roots(slack) and roots(slack)[0], timeout=WAIT)
    words = "token=" if " -- " not in text else "port-forward"
    advance_until(sim, slack, lambda: roots(slack) and words in connect_section(roots(slack)[0]))
    return root


def kernel(sim: world.BackgroundWorld, state: str) -> None:
    """The sim's way to make the notebook's one kernel busy or idle now (as of the sim's clock)."""
    (pod,) = gpubot_pods(sim)
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        client.CoreV1Api(api).patch_namespaced_pod(
            pod["metadata"]["name"],
            "default",
            {"metadata": {"annotations": {jupyter.KERNEL_ANNOTATION: state}}},
        )


def rounds_for(sim: world.BackgroundWorld, bot: runtime.Bot, minutes: int) -> list[object]:
    done = []
    for _ in range(minutes):
        sim.advance(60, step=60)
        caught_up(sim, bot)
        done += bot.reap()
        bot.outbox.flush(WAIT)
    return done


def test_a_notebook_typed_in_at_0_percent_gpu_is_kept_and_released_once_both_are_idle(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(
        sim, slack, tmp_path, redis_url, idle_window_minutes=WINDOW, idle_grace_minutes=5.0
    ) as bot:
        root = start_notebook(sim, slack, "run --type notebook --name nb --hours 8")
        kernel(sim, "busy")  # someone runs a cell that uses no GPU: the GPU stays at 0 %
        assert rounds_for(sim, bot, 40) == [], "GPU idle for 40 min, but a kernel is busy"
        kernel(sim, "idle")
        quiet_from = sim.world.clock.datetime()
        assert rounds_for(sim, bot, 9) == [], "the kernel's last activity is inside the window"
        (warning,) = reap_until(sim, [bot], lambda: said(slack, root, "has been idle"))
        assert sim.world.clock.datetime() - quiet_from >= timedelta(minutes=WINDOW)
        evidence = pod_notes(sim)[labels.IDLE_EVIDENCE_ANNOTATION]
        caught_up(sim, bot)
        slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
        (report,) = slack.wait_until(
            lambda: [e for e in slack.ephemerals("U_ALICE") if "Your workloads" in e["text"]], timeout=WAIT
        )
        reap_until(sim, [bot], lambda: not gpubot_pods(sim) and said(slack, root, "Released"))
    since = f"no notebook activity since <!date^{int(quiet_from.timestamp())}^"
    assert "has been idle: GPU idle 10m00s (under 5% use) and " + since in warning["text"]
    assert evidence.startswith(f"{notebooks.Evidence.NOTEBOOK.value}:")
    assert "· idle: GPU idle 10m" in report["text"] and since in report["text"], report["text"]
    (released,) = said(slack, root, "Released")
    assert since in released["text"] and "nobody kept it" in released["text"]


def test_a_notebook_whose_jupyter_cannot_be_read_is_judged_by_its_gpu_and_told_so(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> None:
    with reaping_bot(sim, slack, tmp_path, redis_url, idle_window_minutes=WINDOW) as bot:
        # Its own command instead of the image's: no Jupyter Server starts, no token is printed.
        root = start_notebook(sim, slack, "run --type notebook --name nb --hours 8 -- sleep 86400")
        (warning,) = reap_until(sim, [bot], lambda: said(slack, root, "has been idle"))
        assert pod_notes(sim)[labels.IDLE_EVIDENCE_ANNOTATION] == notebooks.Evidence.GPU_UNREAD.value
    assert (
        "its notebook's activity could not be read (gpubot has not seen its login token in its log), "
        "so the GPU alone decided" in warning["text"]
    )
