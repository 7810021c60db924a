"""The App Home and `/gpu usage` with the real bot on the sim, the emulator and Redis: a user opens Home and
sees their workload with its buttons, their spend this week and month, the pool and its line; Release on
Home releases it; an admin sees everyone's spend; `/gpu usage` answers the same in text and refuses
what it must, changing nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import runtime
from sim.cluster import world
from sim.slack.emulator import SlackConfig
from sim.slack.ratelimits import RateLimitConfig
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import (
    CUDA,
    WAIT,
    Json,
    advance_until,
    bot_settings,
    gpubot_pods,
    running_bot,
    step_reached,
    wait_for_pods,
)
from tests.integration.test_http_mode import SECRET, http_settings, served_bot

pytestmark = pytest.mark.usefixtures("slack_env")
RELEASE, EXTEND = "gpubot_release", "gpubot_extend"
MONEY = r"\$\d+\.\d\d · \d+\.\d GPU-hours"


@pytest.fixture
def bot_on_sim_clock(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[runtime.Bot]:
    """One clock for the bot and the cluster, so an hour the sim runs is an hour of spend."""
    with running_bot(
        bot_settings(sim, slack, tmp_path, redis_url), slack, clock=sim.world.clock.datetime
    ) as bot:
        yield bot


def opened_home(slack: BackgroundSlack, user: str) -> str:
    """Open the Home tab and wait for the view published after this open."""
    before = (slack.home(user) or {}).get("hash")
    assert slack.open_home(user).acked
    slack.wait_until(lambda: (slack.home(user) or {}).get("hash") not in (None, before), timeout=WAIT)
    return slack.home_text(user)


def home_buttons(slack: BackgroundSlack, user: str) -> list[tuple[str, str]]:
    view = slack.home(user) or {"blocks": []}
    return [
        (e["action_id"], e["value"]) for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]


def usage_answer(slack: BackgroundSlack, user: str, text: str) -> Json:
    """Type `/gpu usage …` and wait for its ephemeral (the ack says nothing for a valid one)."""
    before = len(slack.ephemerals(user))
    delivery = slack.type_command(user, "C_GPU", "/gpu", text)
    assert delivery.acked
    if delivery.shown == "ephemeral":  # the ack refused it at once
        return slack.ephemerals(user)[-1]
    return slack.wait_until(lambda: slack.ephemerals(user)[before:], timeout=WAIT)[-1]  # type: ignore[no-any-return]


def run_for_an_hour(sim: world.BackgroundWorld, slack: BackgroundSlack) -> str:
    slack.type_command("U_ALICE", "C_GPU", "/gpu", f"run {CUDA} -- sleep 86400")
    wait_for_pods(sim, slack)
    advance_until(sim, slack, step_reached(slack, "Running on"))
    sim.advance(3600, step=60)
    (pod,) = gpubot_pods(sim)
    return f"default/{pod['metadata']['name']}"


def test_home_shows_my_workload_spend_and_pool_and_release_on_home_releases(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot_on_sim_clock: runtime.Bot
) -> None:
    workload = run_for_an_hour(sim, slack)
    home = opened_home(slack, "U_ALICE")
    lines = home.splitlines()
    assert lines[0] == "== Your GPU workloads ==", home
    assert re.search(rf"`{workload.split('/')[1]}` — Running, on \S+ · age 1h\d\dm", home), home
    assert home_buttons(slack, "U_ALICE") == [(EXTEND, workload), (RELEASE, workload)]
    week = next(line for line in lines if line.startswith("This week, since Monday "))
    month = next(line for line in lines if line.startswith("This month, since "))
    assert re.search(rf"\(UTC\): {MONEY}$", week) and re.search(rf"\(UTC\): {MONEY}$", month), home
    assert float(re.findall(r"(\d+\.\d) GPU-hours", week)[0]) >= 1.0, week  # an hour on its one GPU, so far
    pool = next(line for line in lines if "GPUs" in line and "free" in line)
    assert "GPUs 0 free, 1 used" in pool and pool.endswith("· no line"), pool
    assert "Everyone's spend" not in home, "only admins see everyone's"

    pressed = slack.click_home_button("U_ALICE", RELEASE, workload)
    assert pressed.acked
    slack.wait_until(
        lambda: all(p["metadata"].get("deletionTimestamp") for p in gpubot_pods(sim)), timeout=WAIT
    )
    dm = slack.wait_until(
        lambda: [m for m in slack.messages("D_ALICE") if "Released" in m["text"]], timeout=WAIT
    )
    assert dm[0]["text"].startswith(f"Released `{workload.split('/')[1]}`"), dm
    slack.wait_until(lambda: not home_buttons(slack, "U_ALICE"), timeout=WAIT)  # redrawn after the press
    assert "Terminating" in slack.home_text("U_ALICE")


def test_an_admin_sees_everyones_spend_on_home_and_by_usage(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot_on_sim_clock: runtime.Bot
) -> None:
    run_for_an_hour(sim, slack)
    home = opened_home(slack, "U_ADMIN")
    assert "Everyone's spend this week, since Monday " in home, home
    assert re.search(rf"• <@U_ALICE> {MONEY}", home) and re.search(rf"• <#C_GPU> {MONEY}", home), home
    assert "This week, since Monday " in home and "(UTC): nothing yet" in home  # the admin's own: none

    everyone = usage_answer(slack, "U_ADMIN", "usage")
    assert everyone["text"].startswith("Everyone's spend this week, since Monday "), everyone["text"]
    rows = [b["text"]["text"] for b in everyone["blocks"] if b["type"] == "section"]
    assert any(re.search(rf"• <@U_ALICE> {MONEY}", r) for r in rows), rows
    assert any(re.search(rf"• <#C_GPU> {MONEY}", r) for r in rows), rows
    hers = usage_answer(slack, "U_ADMIN", "usage month <@U_ALICE|alice>")
    assert hers["text"].startswith("Spend this month, since 1 ") and "U_ALICE" in str(hers["blocks"])
    by_name = usage_answer(slack, "U_ADMIN", "usage @alice")
    assert by_name["text"].startswith("Spend this week, since Monday ") and "U_ALICE" in str(
        by_name["blocks"]
    )


def test_usage_in_text_and_its_refusals_change_nothing(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot_on_sim_clock: runtime.Bot
) -> None:
    run_for_an_hour(sim, slack)
    mine = usage_answer(slack, "U_ALICE", "usage")
    assert mine["text"].startswith("Your spend this week, since Monday "), mine["text"]
    assert re.search(MONEY, mine["text"]), mine["text"]
    month = usage_answer(slack, "U_ALICE", "usage month")
    assert month["text"].startswith("Your spend this month, since 1 "), month["text"]
    assert usage_answer(slack, "U_ALICE", "usage @alice")["text"].startswith("Your spend this week")

    pods_before = gpubot_pods(sim)
    theirs = usage_answer(slack, "U_ALICE", "usage @bob")
    assert theirs["text"] == (
        "Only admins can see someone else's spend. `/gpu usage` shows yours; nothing was changed."
    )
    odd = usage_answer(slack, "U_ALICE", "usage fortnight")
    assert "`/gpu usage` takes `week` or `month`, and one `@user` (got 'fortnight')." in odd["text"]
    unknown = usage_answer(slack, "U_ADMIN", "usage @nobody")
    assert unknown["text"].startswith("I know no @nobody among people whose gpubot runs ended.")
    assert gpubot_pods(sim) == pods_before
    assert [c.params.get("user_id") for c in slack.calls("views.publish")] == []  # text only, no Home


def test_the_home_opens_in_http_mode_too(sim: world.BackgroundWorld, tmp_path: Path, redis_url: str) -> None:
    """The event comes as a signed JSON POST, through the HTTP edge's checks, to the same listener."""
    config = SlackConfig(mode="http", rate_limits=RateLimitConfig(enabled=False))
    with BackgroundSlack(config) as slack:
        with served_bot(http_settings(bot_settings(sim, slack, tmp_path, redis_url))) as (_, url):
            slack.configure_http(bot_url=url, signing_secret=SECRET)
            home = opened_home(slack, "U_BOB")
        (opened,) = [c for c in slack.calls("views.publish")]
    assert home.splitlines()[:2] == [
        "== Your GPU workloads ==",
        "None running. Start one with `/gpu run IMAGE`.",
    ]
    assert opened.params["user_id"] == "U_BOB"
