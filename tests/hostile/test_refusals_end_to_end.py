"""Hostile `/gpu` text through the real bot over Socket Mode: hundreds of refusals, no pod, each one told.

Inputs come from the seeded generator (the same pieces the fuzz draws from), kept when the parser refuses
them; a few more pass the parser and are refused by policy (GPUs per node, lease length, unknown type)
in the slow half. Each refusal must reach the user as an ephemeral in the emulator's transcript: the
parser's in the ack, the policy's by chat.postEphemeral. Nothing may reach the cluster or the channel.
"""

from __future__ import annotations

import itertools

from bot import runtime
from bot.core import commands, models
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.hostile import hostile_text
from tests.integration.botkit import CUDA, WAIT, gpubot_pods, roots

SEED = 1123
PARSER_REFUSED = 300
USERS = ("U_ALICE", "U_BOB")


def parser_refused() -> list[str]:
    """The first PARSER_REFUSED distinct seeded texts the parser refuses."""
    found: dict[str, None] = {}
    for text in hostile_text.seeded_commands(SEED, 20 * PARSER_REFUSED):
        if isinstance(commands.parse_gpu_command(text), models.UsageError):
            found.setdefault(text)
        if len(found) == PARSER_REFUSED:
            break
    return list(found)


POLICY_REFUSED = [
    *(f"run {CUDA} --gpus {n} -- sleep 60" for n in (2, 3, 8, 16)),
    *(f"run {CUDA} --hours {h} -- sleep 60" for h in (25, 48, "100h", 720)),
    *(f"run {CUDA} --type {t} -- sleep 60" for t in ("a100", "h100", "v100", "t4-large")),
]
"""Parsed, then refused by policy: the built-in t4 has one GPU a node, leases end by 24 h, no other type."""


def test_hundreds_of_hostile_commands_are_refused_and_create_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot
) -> None:
    texts = parser_refused()
    assert len(texts) == PARSER_REFUSED
    for text, user in zip(texts, itertools.cycle(USERS), strict=False):
        expected = commands.parse_gpu_command(text)
        assert isinstance(expected, models.UsageError)
        delivery = slack.type_command(user, "C_GPU", "/gpu", text)
        assert delivery.acked and delivery.shown == "ephemeral", (text, delivery)
        assert (delivery.ack_payload or {}).get("text") == expected.message, text

    policy = []  # refused by configuration alone, so in the ack itself: no "Requesting…" it cannot keep
    for text in POLICY_REFUSED:
        delivery = slack.type_command("U_ALICE", "C_GPU", "/gpu", text)
        said = (delivery.ack_payload or {}).get("text", "")
        assert delivery.acked and not said.startswith("Requesting"), (text, said)
        policy.append(said)
    for reason in ("at most 1 GPU", "Leases are at most 24 hours", "There is no GPU type"):
        assert sum(reason in text and "\nTry: `/gpu" in text for text in policy) == 4, reason

    def told(user: str) -> list[str]:
        return [e["text"] for e in slack.ephemerals(user) if e["source"] == "chat.postEphemeral"]

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")  # answered after the refusals' lazy halves
    assert slack.wait_until(lambda: told("U_ALICE"), timeout=WAIT)
    assert [text for text in told("U_ALICE") if "Your" not in text] == [], "the ack said it; nothing follows"

    shown = [e for e in slack.ephemerals() if e["source"] == "ack" and not e["text"].startswith("Requesting")]
    assert len(shown) == PARSER_REFUSED + len(
        POLICY_REFUSED
    )  # every refusal is in the transcript, to its user
    assert {e["user"] for e in shown} == set(USERS)
    assert not gpubot_pods(sim) and not sim.pods() and not roots(slack)
    assert not slack.calls("chat.postMessage")
