"""Issue 21, finding 5: requests from another workspace or Grid org are refused, and change nothing.

Over the real bot, the sim, the emulator and Redis, per surface (a command, a button, a modal submission)
and per stranger: a user of another team, a user of another org, `U_ALICE` and `U_ADMIN` of another team
(Slack user ids are unique only within a workspace, so those are not ours). Before this check, a user of
another workspace created a GPU pod, `U_ALICE` of another team extended alice's workload and an admin id
of another team released it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot import runtime
from bot.core import labels
from sim.cluster import world
from sim.slack.deliveries import Delivery
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from sim.slack.socket_mode import SocketModeConfig
from sim.slack.transcript import Identity, Team
from tests.hostile.conftest import ListenerGate
from tests.hostile.test_authorization import RELEASE_BUTTON, pod_named, start, touchable
from tests.integration.botkit import CUDA, WAIT, bot_settings, gpubot_pods, running_bot

OWNER = "U_ALICE"
OTHER_TEAM = Team("T_OTHER", "othercorp")
OTHER_ORG = Team("T_RIVAL", "rival", enterprise_id="E_RIVAL", enterprise_name="Rival Inc")
SISTER = Team("T_SISTER", "sister", enterprise_id="E_ACME", enterprise_name="Acme")
"""Another workspace of the emulated workspace's own Grid org."""
STRANGERS = {
    "another team's user": ("U_EVE", OTHER_TEAM),
    "another org's user": ("U_EVE", OTHER_ORG),
    "U_ALICE of another team": (OWNER, OTHER_TEAM),
    "U_ADMIN of another team": ("U_ADMIN", OTHER_TEAM),  # our U_ADMIN may act on anyone's workload
}
MODAL = {
    "type": "modal",
    "callback_id": "gpubot_extend_hours",
    "title": {"type": "plain_text", "text": "Extend"},
    "submit": {"type": "plain_text", "text": "Extend"},
    "blocks": [
        {
            "type": "input",
            "block_id": "hours",
            "label": {"type": "plain_text", "text": "Hours"},
            "element": {"type": "plain_text_input", "action_id": "hours_input"},
        }
    ],
}
REFUSAL = "gpubot serves the GPU Lab workspace only; this request came from {}, so nothing was done."
OTHER_WORKSPACE = REFUSAL.format("another workspace")
"""What any stranger reads from a bot installed in one workspace, whatever org they belong to."""
OTHER_ORG_REFUSAL = REFUSAL.format("another Enterprise Grid organization")


@dataclasses.dataclass
class Rig:
    sim: world.BackgroundWorld
    slack: BackgroundSlack
    bot: runtime.Bot
    gate: ListenerGate


def rig_for(
    sim: world.BackgroundWorld,
    tmp_path: Path,
    redis_url: str,
    *,
    identity: Identity,
    **slack_ids: frozenset[str],
) -> Iterator[Rig]:
    config = SlackConfig(
        identity=identity,
        rate_limits=RateLimitConfig(enabled=False),
        socket_mode=SocketModeConfig(ack_timeout=3.0),
    )
    with BackgroundSlack(config) as slack:
        found = bot_settings(sim, slack, tmp_path, redis_url)
        found = dataclasses.replace(found, slack=dataclasses.replace(found.slack, **slack_ids))
        with running_bot(found, slack, clock=sim.world.clock.datetime) as bot:
            slack.wait_until(lambda: bot.leading, timeout=WAIT)
            gate = ListenerGate()
            bot.app.use(gate.record)  # after the workspace check: what reaches gpubot's listeners
            yield Rig(sim, slack, bot, gate)


@pytest.fixture
def rig(sim: world.BackgroundWorld, slack_env: None, tmp_path: Path, redis_url: str) -> Iterator[Rig]:
    """The bot as installed by default: its workspace learned from auth.test (T_GPULAB, no Grid)."""
    yield from rig_for(sim, tmp_path, redis_url, identity=Identity())


@pytest.fixture
def grid_rig(sim: world.BackgroundWorld, slack_env: None, tmp_path: Path, redis_url: str) -> Iterator[Rig]:
    """An org-wide install: GPUBOT_SLACK_ENTERPRISE_IDS=E_ACME, the emulated workspace inside E_ACME."""
    identity = Identity(enterprise_id="E_ACME", enterprise_name="Acme")
    yield from rig_for(sim, tmp_path, redis_url, identity=identity, enterprise_ids=frozenset({"E_ACME"}))


def lease_of(pod: dict[str, Any] | None) -> str:
    assert pod is not None
    return str(pod["metadata"]["annotations"][labels.LEASE_END_ANNOTATION])


def said_to(slack: BackgroundSlack, user: str, source: str) -> list[str]:
    return [e["text"] for e in slack.ephemerals(user) if e["source"] == source]


def act(rig: Rig, surface: str, user: str, team: Team, root_ts: str) -> Callable[[], Delivery]:
    """What the stranger does on each surface: release alice's workload by command or button, or submit
    a modal (opened by the test with a trigger of alice's, as gpubot would open one)."""
    slack = rig.slack
    if surface == "command":
        return lambda: slack.type_command(user, "C_GPU", "/gpu", "extend training-1 2", team=team)
    if surface == "button":
        return lambda: slack.click_button(user, "C_GPU", root_ts, RELEASE_BUTTON, team=team)
    trigger = slack.type_command(OWNER, "C_GPU", "/gpu", "help").payload["trigger_id"]
    view = rig.bot.app.client.views_open(trigger_id=trigger, view=MODAL)["view"]
    return lambda: slack.submit_view(user, view["id"], {"hours": "2"}, team=team)


@pytest.mark.parametrize("stranger", sorted(STRANGERS))
@pytest.mark.parametrize("surface", ["command", "button", "view"])
def test_a_stranger_is_refused_on_every_surface_and_nothing_changes(
    rig: Rig, caplog: pytest.LogCaptureFixture, surface: str, stranger: str
) -> None:
    user, team = STRANGERS[stranger]
    root = start(rig.sim, rig.slack, OWNER, "training-1")
    before = pod_named(rig.sim, "training-1")
    doing = act(rig, surface, user, team, root["ts"])
    reached = len(rig.gate.bodies)
    caplog.set_level(logging.WARNING, logger="handlers.workspaces")

    delivery = doing()

    assert delivery.acked
    if surface == "command":
        assert delivery.ack_payload == {"response_type": "ephemeral", "text": OTHER_WORKSPACE}
    elif surface == "button":
        rig.slack.wait_until(
            lambda: OTHER_WORKSPACE in said_to(rig.slack, user, "response_url"), timeout=WAIT
        )
    else:
        assert delivery.shown == "errors"
        assert delivery.ack_payload == {"response_action": "errors", "errors": {"hours": OTHER_WORKSPACE}}
    assert len(rig.gate.bodies) == reached  # no listener saw it, so no lazy half runs
    after = pod_named(rig.sim, "training-1")
    assert touchable(after) == touchable(before) and lease_of(after) == lease_of(before)
    assert f"by {user} from team {team.id}" in caplog.text


def test_another_teams_user_creates_no_pod(rig: Rig) -> None:
    run = f"run {CUDA} --name theirs -- sleep 3600"
    delivery = rig.slack.type_command("U_EVE", "C_GPU", "/gpu", run, team=OTHER_TEAM)
    assert (delivery.ack_payload or {}).get("text") == OTHER_WORKSPACE
    start(rig.sim, rig.slack, OWNER, "ours")  # the bot is alive and serving its own workspace meanwhile
    assert [p["metadata"]["name"] for p in gpubot_pods(rig.sim)] == ["ours"]


def test_an_org_wide_install_serves_every_workspace_of_its_org_only(grid_rig: Rig) -> None:
    slack = grid_rig.slack
    sister = slack.type_command("U_SAM", "C_GPU", "/gpu", "help", team=SISTER)
    assert "/gpu run" in (sister.ack_payload or {}).get("text", "")
    rival = slack.type_command("U_EVE", "C_GPU", "/gpu", "help", team=OTHER_ORG)
    assert (rival.ack_payload or {}).get("text") == OTHER_ORG_REFUSAL
