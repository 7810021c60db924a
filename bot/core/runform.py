"""Core: `/gpu` alone opens a form for a run; what it offers, and what its submission means.

A submission is made into the `/gpu run` text it stands for and parsed by `commands`, so the form and the
command can never disagree. Each field is also checked alone, so a mistake is told under its own field
(Slack's `response_action: errors`) rather than as one message about the whole command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bot.core import commands, images, models, notices, quota

IMAGE, TYPE, GPUS, HOURS, PORTS, COMMAND = "image", "type", "gpus", "hours", "ports", "command"
FIELDS = (IMAGE, TYPE, GPUS, HOURS, PORTS, COMMAND)
"""The form's inputs, in order; each is a block_id the submission's errors may name."""
RECENT_IMAGES = 5
"""Images of the user's own runs the form offers, newest first."""


@dataclass(frozen=True)
class TypeChoice:
    """A GPU type as the form offers it: its price, and whether a GPU is free now or a node must come."""

    name: str
    description: str
    price_per_hour: float
    free_gpus: int
    max_gpus: int
    image: str = ""
    """The profile's own image, used when the form's image is left empty."""


@dataclass(frozen=True)
class RunForm:
    """What the form shows; `channel` is where the run's thread goes (the channel `/gpu` was typed in)."""

    channel: str
    types: tuple[TypeChoice, ...]
    default_type: str
    recent_images: tuple[str, ...] = ()
    default_hours: float = 4.0
    max_hours: float = 24.0


@dataclass(frozen=True)
class Submitted:
    """The form's fields as typed (or as they were offered, if untouched)."""

    image: str = ""
    type: str = ""
    gpus: str = ""
    hours: str = ""
    ports: str = ""
    command: str = ""


def build_form(
    channel: str,
    profiles: Mapping[str, models.GpuProfile],
    default_profile: str,
    *,
    free: Mapping[str, int],
    recent_images: Sequence[str],
    policy: models.QuotaPolicy,
) -> RunForm:
    """`free` counts the GPUs free now per profile; `recent_images` are the user's, newest first."""
    types = tuple(
        TypeChoice(p.name, p.description, p.price_per_hour, free.get(p.name, 0), p.max_count, p.image)
        for p in profiles.values()
    )
    seen = list(dict.fromkeys(image for image in recent_images if image))  # once each, in order
    return RunForm(
        channel=channel,
        types=types,
        default_type=default_profile,
        recent_images=tuple(seen[:RECENT_IMAGES]),
        default_hours=min(policy.default_lease_hours, policy.max_lease_hours),
        max_hours=policy.max_lease_hours,
    )


def command_text(fields: Submitted) -> str:
    """The `/gpu run` text (after `/gpu`) this submission stands for."""
    words = ["run"]
    if fields.image.strip():
        words.append(fields.image.strip())
    for option, value in (("--type", fields.type), ("--gpus", fields.gpus), ("--hours", fields.hours)):
        if value.strip():
            words += [option, value.strip()]
    ports = ",".join(part.strip() for part in fields.ports.replace(" ", ",").split(",") if part.strip())
    if ports:
        words += ["--port", ports]
    text = shlex.join(words)
    return f"{text} -- {fields.command.strip()}" if fields.command.strip() else text


def check(
    fields: Submitted,
    *,
    profiles: Mapping[str, models.GpuProfile],
    default_profile: str,
    policy: models.QuotaPolicy,
) -> models.RunRequest | dict[str, str]:
    """The run this submission asks for, or what is wrong under each field that is wrong."""
    found = {name: problem for name in FIELDS if (problem := _field_problem(name, fields))}
    if found:
        return found
    parsed = commands.parse_gpu_command(command_text(fields))
    if isinstance(parsed, models.UsageError):  # no field alone is wrong: say it under the first
        return {IMAGE: parsed.problem}
    if not isinstance(parsed, models.RunRequest):
        return {IMAGE: "This form starts a run."}
    return _check_profile(parsed, profiles, default_profile, policy) or parsed


def _field_problem(name: str, fields: Submitted) -> str:
    """The field's own mistake, found by parsing a run that has only it."""
    value = getattr(fields, name).strip()
    if not value:
        return ""
    alone = replace(Submitted(image=images.EXAMPLE_IMAGE), **{name: value})
    parsed = commands.parse_gpu_command(command_text(alone))
    return parsed.problem if isinstance(parsed, models.UsageError) else ""


def _check_profile(
    request: models.RunRequest,
    profiles: Mapping[str, models.GpuProfile],
    default_profile: str,
    policy: models.QuotaPolicy,
) -> dict[str, str]:
    profile = quota.resolve_profile(request, profiles, default_profile)
    if isinstance(profile, models.UsageError):
        return {TYPE: profile.problem}
    if quota.check_image(request, profile):
        return {IMAGE: f"Give an image to run: the `{profile.name}` type has none of its own."}
    if refused := quota.check_limits(request, profile, policy):
        return {GPUS if request.gpus > profile.max_count else HOURS: refused.problem}
    return {}


def type_label(choice: TypeChoice) -> str:
    """ "t4 · $0.54/h": a type and the price of its node-hour."""
    price = f" · {notices.format_cost(choice.price_per_hour)}/h" if choice.price_per_hour else ""
    return f"{choice.name}{price}"


def type_note(choice: TypeChoice) -> str:
    """Whether a run of this type can start at once: "2 GPUs free now", or "none free: a node is added"."""
    if choice.free_gpus:
        return f"{choice.free_gpus} GPU{'s' if choice.free_gpus != 1 else ''} free now"
    return "none free now: a node is added, which takes minutes"
