"""The run form: what it offers, and its submission read as the `/gpu run` it stands for."""

from __future__ import annotations

import pytest

from bot.core import commands, models, runform

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
T4 = models.GpuProfile(name="t4", max_count=1, price_per_hour=0.54)
NOTEBOOK = models.GpuProfile(name="notebook", image="quay.io/jupyter/base-notebook", ports=(8888,))
PROFILES = {"t4": T4, "notebook": NOTEBOOK}
POLICY = models.QuotaPolicy(max_gpus_per_user=2, default_lease_hours=4, max_lease_hours=24)


def check(**typed: str) -> models.RunRequest | dict[str, str]:
    return runform.check(runform.Submitted(**typed), profiles=PROFILES, default_profile="t4", policy=POLICY)


def test_a_submission_is_the_run_command_it_stands_for() -> None:
    fields = runform.Submitted(IMAGE, "t4", "1", "1.5", "8888 6006", "python -c 'print(1)'")
    text = runform.command_text(fields)
    assert text == f"run {IMAGE} --type t4 --gpus 1 --hours 1.5 --port 8888,6006 -- python -c 'print(1)'"
    assert check(**vars(fields)) == commands.parse_gpu_command(text)


def test_an_empty_image_takes_the_types_own() -> None:
    checked = check(type="notebook", gpus="1", hours="4")
    assert isinstance(checked, models.RunRequest) and checked.image == "" and checked.profile == "notebook"


@pytest.mark.parametrize(
    ("typed", "errors"),
    [
        ({"image": "a b"}, {"image": "spaces"}),
        ({"image": IMAGE, "gpus": "two"}, {"gpus": "whole number"}),
        ({"image": IMAGE, "hours": "0"}, {"hours": "between 3 minutes"}),
        ({"image": IMAGE, "hours": "48"}, {"hours": "Leases are at most 24 hours"}),
        ({"image": IMAGE, "type": "h100"}, {"type": "There is no GPU type `h100`"}),
        ({"image": IMAGE, "ports": "99999", "hours": "x"}, {"hours": "number of hours", "ports": "65535"}),
        ({"type": "t4"}, {"image": "Give an image to run"}),
    ],
)
def test_each_mistake_is_told_under_its_own_field(typed: dict[str, str], errors: dict[str, str]) -> None:
    found = check(**typed)
    assert isinstance(found, dict) and sorted(found) == sorted(errors), found
    for field, words in errors.items():
        assert words in found[field], found


def test_the_form_offers_each_type_with_its_price_and_recent_images_newest_first_once() -> None:
    form = runform.build_form(
        "C1", PROFILES, "t4", free={"t4": 2}, recent_images=["b", "a", "b", "", "c"], policy=POLICY
    )
    assert form.recent_images == ("b", "a", "c")
    t4, notebook = form.types
    assert (runform.type_label(t4), runform.type_note(t4)) == ("t4 · $0.54/h", "2 GPUs free now")
    assert runform.type_label(notebook) == "notebook"
    assert runform.type_note(notebook) == "none free now: a node is added, which takes minutes"
    assert (form.default_hours, form.max_hours) == (4, 24)


def test_the_handler_listens_for_the_form_the_adapter_renders() -> None:
    from bot.adapters import slack_forms
    from handlers import forms

    assert forms.CALLBACK_ID == slack_forms.CALLBACK_ID
