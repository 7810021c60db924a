"""Handlers: a global middleware that turns away requests from other workspaces before any listener runs.

It runs after Bolt's signature check, so what it reads is what Slack sent; `workspaces.decide` says whether
gpubot serves that workspace. A refused request changes nothing: no listener, no lazy half, no claim in
Redis. The user is told why in the way each kind of request allows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse

from bot.core import workspaces

logger = logging.getLogger(__name__)


class WorkspaceGate:
    def __init__(self, installation: workspaces.Installation) -> None:
        self.installation = installation

    def check(self, req: BoltRequest, next: Callable[[], None]) -> BoltResponse | None:
        """Bolt's middleware signature: call `next` to go on, or return the response that ends the request."""
        body: dict[str, Any] = req.body
        origin = workspaces.origin_of(body)
        verdict = workspaces.decide(origin, self.installation)
        if verdict is workspaces.Verdict.SERVED:
            next()
            return None
        kind = str(body.get("command") or body.get("type") or "request")
        user = workspaces.user_of(body)
        logger.warning("refused %s by %s from %s: %s", kind, user, origin.describe(), verdict.value)
        return self.refusal(req, workspaces.refusal_text(verdict, self.installation))

    def refusal(self, req: BoltRequest, text: str) -> BoltResponse:
        body = req.body
        if "command" in body:  # the ack's own answer, shown only to the user who typed it
            return BoltResponse(status=200, body={"response_type": "ephemeral", "text": text})
        if body.get("type") == "view_submission":
            return BoltResponse(status=200, body=view_refusal(body, text))
        tell_by_response_url(req, text)  # a block_actions ack carries no message: Slack ignores one
        return BoltResponse(status=200, body="")


def view_refusal(body: dict[str, Any], text: str) -> dict[str, Any]:
    """`response_action: errors` on the modal's first input block, so the modal stays open saying why
    (api.slack.com/surfaces/modals#displaying_errors); an empty ack, closing it, when it has no input."""
    block_id = workspaces.first_input_block(body.get("view"))
    return {"response_action": "errors", "errors": {block_id: text}} if block_id else {}


def tell_by_response_url(req: BoltRequest, text: str) -> None:
    """An ephemeral to the clicker through the click's response_url (no Web API call, so nothing in the
    workspace changes); a failure is logged, and the click still gets its ack."""
    if req.context.response_url is None:
        return
    respond = req.context.respond
    try:
        if respond is not None:
            respond(text=text, response_type="ephemeral", replace_original=False)
    except Exception:  # the network, or an expired url: the refusal is logged already
        logger.warning("could not tell a refused user through the response_url", exc_info=True)


def register(app: App, installation: workspaces.Installation) -> None:
    app.use(WorkspaceGate(installation).check)
