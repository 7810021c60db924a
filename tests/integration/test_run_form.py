"""`/gpu` alone opens the run form: what it offers, its mistakes under their fields, and a submission that
is exactly `/gpu run`. Against the real bot (Bolt), the Slack emulator's views.open and view_submission
(validated as Slack validates views), the sim and Redis."""

from __future__ import annotations

from typing import Any

import pytest

from bot import app
from bot.core import images
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import CUDA, WAIT, Json, advance_until, roots

pytestmark = pytest.mark.usefixtures("slack_env")


def open_form(slack: BackgroundSlack, user: str = "U_ALICE") -> Json:
    before = {v["id"] for v in slack.open_views()}
    answer = slack.type_command(user, "C_GPU", "/gpu", "")
    assert answer.acked
    (view,) = slack.wait_until(lambda: [v for v in slack.open_views() if v["id"] not in before], timeout=WAIT)
    return view


def block(view: Json, block_id: str) -> Json:
    return next(b for b in view["blocks"] if b.get("block_id") == block_id)


def element(view: Json, block_id: str) -> dict[str, Any]:
    found: dict[str, Any] = block(view, block_id)["element"]
    return found


def test_gpu_alone_opens_the_form_with_each_type_its_price_and_what_is_free(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    view = open_form(slack)
    assert view["title"]["text"] == "Run on a GPU" and view["private_metadata"] == "C_GPU"
    options = element(view, "type")["options"]
    assert [(o["value"], o["text"]["text"]) for o in options] == [
        ("t4", "t4 · $0.54/h"),
        ("notebook", "notebook · $0.54/h"),
    ]
    assert options[0]["description"]["text"] == "none free now: a node is added, which takes minutes"
    assert element(view, "type")["initial_option"]["value"] == "t4"
    assert element(view, "hours")["initial_value"] == "4"
    assert "notebook" in block(view, "image")["hint"]["text"], "an empty image means the type's own"
    assert not slack.ephemerals("U_ALICE"), "no help text: the form is the answer"


def test_a_submission_is_exactly_gpu_run_and_starts_one_run(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    view = open_form(slack)
    typed = {"image": CUDA, "hours": "2", "ports": "8888", "command": "python train.py --epochs 3"}
    done = slack.submit_view("U_ALICE", view["id"], typed)
    assert done.shown == "closed"
    root = advance_until(sim, slack, lambda: next(iter(roots(slack)), None))
    advance_until(sim, slack, lambda: "Running" in slack.messages("C_GPU")[0]["text"] or None)
    pods = sim.run(lambda: list(sim.world.store.items("pods", "default")))
    (pod,) = pods
    container = pod["spec"]["containers"][0]
    assert container["image"] == CUDA and container["command"] == ["python", "train.py", "--epochs", "3"]
    assert container["ports"] == [{"containerPort": 8888, "protocol": "TCP"}]
    notes = pod["metadata"]["annotations"]
    command = notes["gpubot.dev/command"]
    assert (
        command == f"/gpu run {CUDA} --type t4 --gpus 1 --hours 2 --port 8888 -- python train.py --epochs 3"
    )
    assert root["channel"] == "C_GPU"
    again = slack.redeliver(done)
    assert again.acked
    assert len(sim.run(lambda: list(sim.world.store.items("pods", "default")))) == 1, "one run per form"


@pytest.mark.parametrize(
    ("typed", "field", "words"),
    [
        ({"image": "NVIDIA/cuda"}, "image", "must be lowercase"),
        ({"hours": "soon"}, "hours", "number of hours"),
        ({"hours": "100"}, "hours", "Leases are at most 24 hours"),
        ({"ports": "8888, x"}, "ports", "from 1 to 65535, not 'x'"),
        ({"command": 'python -c "unclosed'}, "command", "quote is not closed"),
        ({"gpus": "4"}, "gpus", "can have at most 1 GPU"),
        ({"image": "", "type": "t4"}, "image", "Give an image to run"),
    ],
)
def test_a_mistake_is_told_under_its_field_and_nothing_starts(
    sim: world.BackgroundWorld,
    slack: BackgroundSlack,
    bot: app.Bot,
    typed: dict[str, str],
    field: str,
    words: str,
) -> None:
    view = open_form(slack)
    done = slack.submit_view("U_ALICE", view["id"], {"image": CUDA, **typed})
    assert done.shown == "errors", done
    assert done.ack_payload is not None and done.ack_payload["response_action"] == "errors"
    errors = done.ack_payload["errors"]
    assert list(errors) == [field] and words in errors[field], errors
    assert [v["id"] for v in slack.open_views()] == [view["id"]], "the form stays open"
    assert roots(slack) == [] and sim.run(lambda: list(sim.world.store.items("pods", "default"))) == []


def test_the_notebook_type_runs_its_own_image_and_the_form_offers_recent_images_first(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    view = open_form(slack)
    assert element(view, "image").get("initial_value") is None, "no runs yet: nothing to offer"
    assert slack.submit_view("U_ALICE", view["id"], {"image": "", "type": "notebook"}).shown == "closed"
    advance_until(sim, slack, lambda: sim.run(lambda: list(sim.world.store.items("pods", "default"))))
    (pod,) = sim.run(lambda: list(sim.world.store.items("pods", "default")))
    assert pod["spec"]["containers"][0]["image"].startswith("quay.io/jupyter/pytorch-notebook")
    again = open_form(slack)
    assert element(again, "image")["initial_value"].startswith("quay.io/jupyter/pytorch-notebook")
    assert images.EXAMPLE_IMAGE not in str(block(again, "image").get("hint"))


def test_a_form_fixed_after_a_mistake_starts_its_run(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: app.Bot
) -> None:
    view = open_form(slack)
    assert slack.submit_view("U_ALICE", view["id"], {"image": CUDA, "hours": "lots"}).shown == "errors"
    assert slack.submit_view("U_ALICE", view["id"], {"image": CUDA, "hours": "1"}).shown == "closed"
    advance_until(sim, slack, lambda: sim.run(lambda: list(sim.world.store.items("pods", "default"))))
    (pod,) = sim.run(lambda: list(sim.world.store.items("pods", "default")))
    assert (
        pod["metadata"]["annotations"]["gpubot.dev/command"]
        == f"/gpu run {CUDA} --type t4 --gpus 1 --hours 1"
    )
