"""The run form as a Slack modal (Block Kit); `handlers/forms.py` reads its submission back.

Limits from docs.slack.dev/reference/block-kit: a modal's title and its buttons' texts at most 24
characters; an option's text and description at most 75; a placeholder 150; `private_metadata` 3,000.
"""

from __future__ import annotations

from bot.adapters.slack_render import Block, clip, plain
from bot.core import commands, runform

CALLBACK_ID = "gpubot_run_form"
OPTION_TEXT_MAX = 75
PLACEHOLDER_MAX = 150


def render_run_form(form: runform.RunForm) -> Block:
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "title": plain("Run on a GPU"),
        "submit": plain("Run"),
        "close": plain("Cancel"),
        "private_metadata": form.channel,
        "blocks": [
            _image_input(form),
            _type_input(form),
            _input(runform.GPUS, "GPUs", _gpus_element(form), hint="Each pod's GPUs are on one node."),
            _input(
                runform.HOURS,
                "Hours",
                _text(runform.HOURS, initial=f"{form.default_hours:g}", placeholder="4, 1.5 or 90m"),
                hint=f"The lease: at most {form.max_hours:g} hours; extend it later from the thread.",
            ),
            _input(
                runform.PORTS,
                "Ports",
                _text(runform.PORTS, placeholder="8888, 6006"),
                optional=True,
                hint="Ports to reach once it runs; the thread gives the kubectl line for each.",
            ),
            _input(
                runform.COMMAND,
                "Command",
                _text(runform.COMMAND, placeholder="python train.py --epochs 10"),
                optional=True,
                hint="Run as words, never through a shell; empty runs the image's own command.",
            ),
        ],
    }


def _image_input(form: runform.RunForm) -> Block:
    recent = form.recent_images
    own = [t.name for t in form.types if t.image]
    hints = []
    if len(recent) > 1:
        hints.append("Your recent images: " + ", ".join(recent[1:]))
    if own:
        hints.append(f"Leave it empty with the {' or '.join(own)} type to run that type's own image.")
    element = _text(
        runform.IMAGE, initial=recent[0] if recent else "", placeholder="nvidia/cuda:12.4.1-base-ubuntu22.04"
    )
    return _input(runform.IMAGE, "Image", element, optional=True, hint=" ".join(hints))


def _type_input(form: runform.RunForm) -> Block:
    options = [
        {
            "text": plain(clip(runform.type_label(choice), OPTION_TEXT_MAX)),
            "description": plain(clip(runform.type_note(choice), OPTION_TEXT_MAX)),
            "value": choice.name,
        }
        for choice in form.types
    ]
    element: Block = {"type": "static_select", "action_id": runform.TYPE, "options": options}
    initial = next((o for o in options if o["value"] == form.default_type), None)
    if initial is not None:
        element["initial_option"] = initial
    return _input(runform.TYPE, "GPU type", element)


def _gpus_element(form: runform.RunForm) -> Block:
    most = max((t.max_gpus for t in form.types), default=1)
    return {
        "type": "number_input",
        "action_id": runform.GPUS,
        "is_decimal_allowed": False,
        "initial_value": "1",
        "min_value": "1",
        "max_value": str(min(most, commands.MAX_GPUS_PER_POD)),
    }


def _text(action_id: str, *, initial: str = "", placeholder: str = "") -> Block:
    element: Block = {"type": "plain_text_input", "action_id": action_id}
    if initial:
        element["initial_value"] = initial
    if placeholder:
        element["placeholder"] = plain(clip(placeholder, PLACEHOLDER_MAX))
    return element


def _input(block_id: str, label: str, element: Block, *, optional: bool = False, hint: str = "") -> Block:
    block: Block = {"type": "input", "block_id": block_id, "label": plain(label), "element": element}
    if optional:
        block["optional"] = True
    if hint:
        block["hint"] = plain(clip(hint, 2000))
    return block
