"""Core: whether a Slack request comes from the workspace gpubot serves (issue 21, finding 5).

A valid signature only proves that Slack sent a request, not from where: a user of another workspace (a
Slack Connect channel, another workspace of an Enterprise Grid org) reaches the same app, and Slack user
ids are only unique within a workspace, so `U_ALICE` of another team is not our alice. Every request is
checked against the installation's workspaces before any listener runs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.fields import as_text


@dataclass(frozen=True)
class Installation:
    """Where gpubot is installed: the workspaces (and Enterprise Grid orgs) whose users it serves."""

    team_ids: frozenset[str] = frozenset()
    """Workspaces whose users may use gpubot."""
    enterprise_ids: frozenset[str] = frozenset()
    """Enterprise Grid orgs with an org-wide install: every workspace of theirs may."""
    name: str = ""
    """The workspace's name from auth.test, for the refusal's words; empty when unknown."""


@dataclass(frozen=True)
class Origin:
    """Where a request says it comes from, as Slack's payloads carry it."""

    team_id: str = ""
    """The workspace the user acted in: `team_id` (commands), `team.id` (interactions)."""
    user_team_id: str = ""
    """The acting user's home workspace (`user.team_id` of interactions); commands do not say."""
    enterprise_id: str = ""
    """The Enterprise Grid org, empty outside one."""

    def describe(self) -> str:
        """For the log line: `team T1 (user's team T2) enterprise E1`."""
        words = [f"team {self.team_id or '(none)'}"]
        if self.user_team_id and self.user_team_id != self.team_id:
            words.append(f"(user's team {self.user_team_id})")
        if self.enterprise_id:
            words.append(f"enterprise {self.enterprise_id}")
        return " ".join(words)


class Verdict(enum.Enum):
    SERVED = "served"
    OTHER_TEAM = "another workspace"
    OTHER_ENTERPRISE = "another Enterprise Grid organization"
    NO_TEAM = "a workspace Slack did not name"


def _id_of(value: Any) -> str:
    """`"T1"` or `{"id": "T1", ...}` (payloads use both shapes), else ""."""
    return as_text(value.get("id")) if isinstance(value, Mapping) else as_text(value)


def origin_of(body: Mapping[str, Any]) -> Origin:
    """The origin of a slash command, interaction (block_actions, view_submission…) or event callback.

    Not Bolt's `extract_team_id`: for a view it prefers `view.app_installed_team_id`, the team the app is
    installed in, which is exactly what this check must not trust."""
    team = body.get("team")
    user = body.get("user")
    enterprise = _id_of(body.get("enterprise")) or as_text(body.get("enterprise_id"))
    if not enterprise and isinstance(team, Mapping):
        enterprise = as_text(team.get("enterprise_id"))
    return Origin(
        team_id=_id_of(team) or as_text(body.get("team_id")),
        user_team_id=as_text(user.get("team_id")) if isinstance(user, Mapping) else "",
        enterprise_id=enterprise,
    )


def user_of(body: Mapping[str, Any]) -> str:
    """The acting user's id: `user_id` (commands) or `user.id` (interactions)."""
    return as_text(body.get("user_id")) or _id_of(body.get("user"))


def first_input_block(view: Any) -> str:
    """The block_id of a submitted modal's first input block, where Slack can show an error; else ""."""
    blocks = view.get("blocks") if isinstance(view, Mapping) else None
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "input" and as_text(block.get("block_id")):
            return as_text(block.get("block_id"))
    return ""


def decide(origin: Origin, installation: Installation) -> Verdict:
    """SERVED when the request's org is one installed org-wide, or every workspace it names is installed.

    A request naming an org other than the configured ones is refused even when its team is listed: a
    team belongs to one org, so that pair is not something Slack sends."""
    if origin.enterprise_id and installation.enterprise_ids:
        if origin.enterprise_id not in installation.enterprise_ids:
            return Verdict.OTHER_ENTERPRISE
        return Verdict.SERVED
    teams = {team for team in (origin.team_id, origin.user_team_id) if team}
    if not teams:
        return Verdict.NO_TEAM
    return Verdict.SERVED if teams <= installation.team_ids else Verdict.OTHER_TEAM


def installation(
    *, team_ids: frozenset[str], enterprise_ids: frozenset[str], auth_test: Mapping[str, Any]
) -> Installation:
    """The configured ids, else what the bot token's auth.test says: its workspace, or its org for an
    org-wide install (`is_enterprise_install`)."""
    name = as_text(auth_test.get("team"))
    if team_ids or enterprise_ids:
        return Installation(team_ids=team_ids, enterprise_ids=enterprise_ids, name=name)
    if auth_test.get("is_enterprise_install") is True:
        org = as_text(auth_test.get("enterprise_id"))
        return Installation(enterprise_ids=frozenset({org} - {""}), name=name)
    team = as_text(auth_test.get("team_id"))
    return Installation(team_ids=frozenset({team} - {""}), name=name)


def refusal_text(verdict: Verdict, installation: Installation) -> str:
    """What the refused user reads: why, and that nothing happened."""
    home = f"the {installation.name} workspace" if installation.name else "the workspace it is installed in"
    return f"gpubot serves {home} only; this request came from {verdict.value}, so nothing was done."
