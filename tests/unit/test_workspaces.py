"""Whose requests gpubot serves: the pure decision, the payload fields it reads, what auth.test teaches."""

from __future__ import annotations

from typing import Any

import pytest

from bot.core import workspaces
from bot.core.workspaces import Installation, Origin, Verdict

ONE_TEAM = Installation(team_ids=frozenset({"T_GPULAB"}))
ORG_WIDE = Installation(enterprise_ids=frozenset({"E_ACME"}))
BOTH = Installation(team_ids=frozenset({"T_GPULAB"}), enterprise_ids=frozenset({"E_ACME"}))


@pytest.mark.parametrize(
    ("origin", "installed", "verdict"),
    [
        (Origin("T_GPULAB", "T_GPULAB"), ONE_TEAM, Verdict.SERVED),
        (Origin("T_GPULAB"), ONE_TEAM, Verdict.SERVED),  # a command: no user team given
        (Origin("T_OTHER", "T_OTHER"), ONE_TEAM, Verdict.OTHER_TEAM),
        (Origin("T_GPULAB", "T_OTHER"), ONE_TEAM, Verdict.OTHER_TEAM),  # an external member in our channel
        (Origin("T_OTHER", "T_OTHER", "E_RIVAL"), ONE_TEAM, Verdict.OTHER_TEAM),
        (Origin(), ONE_TEAM, Verdict.NO_TEAM),
        (Origin("T_SISTER", "T_SISTER", "E_ACME"), ORG_WIDE, Verdict.SERVED),
        (Origin("T_RIVAL", "T_RIVAL", "E_RIVAL"), ORG_WIDE, Verdict.OTHER_ENTERPRISE),
        (Origin("T_GPULAB", "T_GPULAB"), ORG_WIDE, Verdict.OTHER_TEAM),  # no org named: not this org's
        (Origin("T_GPULAB", "T_GPULAB", "E_RIVAL"), BOTH, Verdict.OTHER_ENTERPRISE),  # a listed team, odd org
        (Origin("T_GPULAB"), BOTH, Verdict.SERVED),
        (Origin("T_GPULAB"), Installation(), Verdict.OTHER_TEAM),  # nothing installed serves nobody
    ],
)
def test_decide(origin: Origin, installed: Installation, verdict: Verdict) -> None:
    assert workspaces.decide(origin, installed) is verdict


COMMAND = {"team_id": "T1", "user_id": "U1", "enterprise_id": "E1", "command": "/gpu"}
CLICK = {
    "type": "block_actions",
    "team": {"id": "T1", "domain": "one", "enterprise_id": "E1"},
    "user": {"id": "U1", "team_id": "T2"},
    "enterprise": {"id": "E1", "name": "One"},
}
ORG_INSTALL_CLICK = {
    "type": "block_actions",
    "team": None,
    "user": {"id": "U1", "team_id": "T2"},
    "enterprise": "E1",
}
VIEW = {
    "type": "view_submission",
    "team": {"id": "T2"},
    "user": {"id": "U1", "team_id": "T2"},
    "view": {"team_id": "T2", "app_installed_team_id": "T_GPULAB"},
    "enterprise": None,
}


@pytest.mark.parametrize(
    ("body", "origin", "user"),
    [
        (COMMAND, Origin("T1", "", "E1"), "U1"),
        (CLICK, Origin("T1", "T2", "E1"), "U1"),
        (ORG_INSTALL_CLICK, Origin("", "T2", "E1"), "U1"),
        (VIEW, Origin("T2", "T2", ""), "U1"),  # never the app's own team from app_installed_team_id
        ({"team": "T3", "user": "U3"}, Origin("T3"), "U3"),
        ({}, Origin(), ""),
    ],
)
def test_origin_and_user_of(body: dict[str, Any], origin: Origin, user: str) -> None:
    assert workspaces.origin_of(body) == origin
    assert workspaces.user_of(body) == user


@pytest.mark.parametrize(
    ("teams", "orgs", "auth_test", "installed"),
    [
        (
            frozenset(),
            frozenset(),
            {"team_id": "T1", "team": "Lab"},
            Installation(frozenset({"T1"}), name="Lab"),
        ),
        (
            frozenset(),
            frozenset(),
            {"team_id": "T1", "enterprise_id": "E1", "is_enterprise_install": False},
            Installation(frozenset({"T1"})),  # a workspace install inside Grid: that workspace only
        ),
        (
            frozenset(),
            frozenset(),
            {"enterprise_id": "E1", "is_enterprise_install": True},
            Installation(enterprise_ids=frozenset({"E1"})),
        ),
        (
            frozenset({"T9"}),
            frozenset(),
            {"team_id": "T1"},
            Installation(frozenset({"T9"})),
        ),  # configured wins
        (frozenset(), frozenset({"E9"}), {"team_id": "T1"}, Installation(enterprise_ids=frozenset({"E9"}))),
    ],
)
def test_installation_is_configured_or_learned_from_auth_test(
    teams: frozenset[str], orgs: frozenset[str], auth_test: dict[str, Any], installed: Installation
) -> None:
    assert workspaces.installation(team_ids=teams, enterprise_ids=orgs, auth_test=auth_test) == installed


def test_first_input_block_is_where_a_modal_shows_the_refusal() -> None:
    view = {"blocks": [{"type": "section", "block_id": "s"}, {"type": "input", "block_id": "hours"}]}
    assert workspaces.first_input_block(view) == "hours"
    assert workspaces.first_input_block({"blocks": [{"type": "section", "block_id": "s"}]}) == ""
    assert workspaces.first_input_block(None) == ""


def test_refusal_names_the_served_workspace() -> None:
    assert workspaces.refusal_text(Verdict.OTHER_TEAM, Installation(name="GPU Lab")) == (
        "gpubot serves the GPU Lab workspace only; this request came from another workspace, "
        "so nothing was done."
    )
    assert "the workspace it is installed in" in workspaces.refusal_text(Verdict.NO_TEAM, Installation())
