"""Handlers: the `/gpu` slash command. Parse and ack within milliseconds; the service does the rest lazily."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App, Respond

from bot.core import commands, models, notices
from bot.services import Services

logger = logging.getLogger(__name__)

COMMAND = "/gpu"


def ack_text(parsed: models.GpuCommand | models.UsageError) -> str | None:
    """What the user sees at once: the refusal, the help, a "requesting…", or nothing.

    Status, usage, release, extend, logs and warm say nothing yet: their answer needs the cluster or the
    store, and comes as an ephemeral.
    """
    if isinstance(parsed, models.UsageError):
        return parsed.message
    if isinstance(parsed, models.HelpRequest):
        return commands.help_text(parsed.topic)
    if isinstance(parsed, models.DoctorRequest):
        return "Running the pre-flight checks… the answers come here in a few seconds."
    if isinstance(parsed, models.RunRequest):
        gpus = (
            notices.format_gpus(parsed.gpus, parsed.profile)
            if parsed.profile
            else f"{parsed.gpus} GPU{'' if parsed.gpus == 1 else 's'}"
        )
        what = f"`{parsed.image}`" if parsed.image else f"the `{parsed.profile}` image"
        return f"Requesting {gpus} for {what}… I will follow it in a thread here."
    return None


def opens_form(command: dict[str, Any], services: Services) -> bool:
    """`/gpu` with nothing after it opens the run form (`/gpu help` still prints the help)."""
    return services.forms is not None and not str(command.get("text", "")).strip()


def owner_of(command: dict[str, Any]) -> models.Owner:
    return models.Owner(
        user_id=str(command.get("user_id", "")),
        user_name=str(command.get("user_name", "")),
        team_id=str(command.get("team_id", "")),
    )


class ResponseUrlAnswer:
    """`ports.Answer` by Bolt's `respond`: an ephemeral through the command's response_url."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond

    def __call__(self, text: str) -> bool:
        try:
            return self.respond(text=text, response_type="ephemeral").status_code == 200
        except Exception:  # the network, or an expired url: the caller falls back or logs
            logger.warning("could not answer through the response_url", exc_info=True)
            return False


class GpuCommand:
    """Bound methods rather than closures, so Bolt sees plain listener signatures."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def parse(self, command: dict[str, Any]) -> models.GpuCommand | models.UsageError:
        """The command, or its refusal, including what configuration alone refuses (a type that does not
        exist, more GPUs than a node has): the ack says it, and the lazy half then does nothing."""
        parsed = commands.parse_gpu_command(str(command.get("text", "")))
        if isinstance(parsed, models.RunRequest):
            return self.services.launcher.precheck(parsed) or parsed
        return parsed

    def ack_gpu(self, ack: Ack, command: dict[str, Any]) -> None:
        if opens_form(command, self.services):
            ack()  # the form opens in the lazy half, within the trigger's 3 seconds
            return
        ack(text=ack_text(self.parse(command)) or "")  # "" is Bolt's own default: an empty ack

    def run_gpu(self, command: dict[str, Any], respond: Respond) -> None:
        request_id = str(command.get("trigger_id", ""))
        if not self.services.first_delivery(request_id):
            return
        owner, channel = owner_of(command), str(command.get("channel_id", ""))
        if opens_form(command, self.services) and self.services.forms is not None:
            self.services.forms.open(owner.user_id, channel, request_id)
            return
        parsed = commands.parse_gpu_command(str(command.get("text", "")))
        if isinstance(parsed, models.RunRequest) and self.services.launcher.precheck(parsed):
            self.services.launcher.refused_at_once()  # the ack said why
            return
        if isinstance(parsed, models.RunRequest | models.StatusRequest):
            answer = ResponseUrlAnswer(respond)
            self.services.launcher.handle(parsed, owner, channel, request_id=request_id, answer=answer)
        elif isinstance(parsed, models.ReleaseRequest | models.ExtendRequest):
            self.services.leases.handle(parsed, owner.user_id, channel)
        elif isinstance(parsed, models.UsageRequest) and self.services.spending is not None:
            self.services.spending.handle(parsed, owner, channel)
        elif isinstance(parsed, models.LogsRequest):
            self.services.logs.handle(parsed, owner.user_id, channel)
        elif isinstance(parsed, models.WarmRequest) and self.services.warmer is not None:
            self.services.warmer.handle(parsed, owner.user_id, channel)
        elif isinstance(parsed, models.DoctorRequest) and self.services.doctor is not None:
            self.services.doctor.handle(owner.user_id, channel)


def register(app: App, services: Services) -> None:
    listener = GpuCommand(services)
    app.command(COMMAND)(ack=listener.ack_gpu, lazy=[listener.run_gpu])
