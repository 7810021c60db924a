"""Pre-warm schedules end to end: `/gpu warm` through real Bolt and the emulator, the ConfigMap every replica
watches, and the pool's min size at the sim's GKE API, moved by the leader at each edge.

The bot's clock is the sim's, so an edge is reached by moving simulated time and running what the edge's
cron job runs (`Bot.warm_now`); the cron triggers themselves are tested on a fake clock in the unit tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1
from kubernetes import client

from bot import runtime, settings
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from tests.integration.botkit import advance_until, bot_settings, running_bot

pytestmark = pytest.mark.usefixtures("slack_env")

OPS = "C_OPS"
POOL_PATH = f"projects/{world.PROJECT}/locations/{world.LOCATION}/clusters/{world.CLUSTER}/nodePools/gpu-pool"


def noon_zone(now: datetime) -> str:
    """A fixed-offset zone where it is about noon now, so a schedule's hours never cross midnight."""
    offset = (12 - now.hour + 12) % 24 - 12  # -12..11 hours east of UTC
    return "UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"  # Etc/GMT-3 is three hours east


def hours_around(now: datetime, zone: str, *, before: int, after: int) -> str:
    from zoneinfo import ZoneInfo

    local = now.astimezone(ZoneInfo(zone))
    start, end = local - timedelta(minutes=before), local + timedelta(minutes=after)
    return f"{start:%H:%M}-{end:%H:%M}"


@pytest.fixture
def warm_bot(
    sim: world.BackgroundWorld, slack: BackgroundSlack, tmp_path: Path, redis_url: str
) -> Iterator[runtime.Bot]:
    base = bot_settings(sim, slack, tmp_path, redis_url)
    config = dataclasses.replace(
        base,
        slack=dataclasses.replace(base.slack, scale_channel=OPS),
        cloud=settings.CloudSettings(
            gke_endpoint=sim.url,
            poll_seconds=0.05,
            provider="gke",
            cluster_name=world.CLUSTER,
            project=world.PROJECT,
            location=world.LOCATION,
        ),
        reaper=dataclasses.replace(base.reaper, interval_seconds=3600),
    )
    with running_bot(config, slack, clock=sim.world.clock.datetime) as running:
        yield running


def gke_pool(sim: world.BackgroundWorld) -> container_v1.NodePool:
    manager = container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": sim.url}
    )
    return manager.get_node_pool(name=POOL_PATH)


def warm_configmap(sim: world.BackgroundWorld) -> dict[str, str] | None:
    core = client.CoreV1Api(client.ApiClient(client.Configuration(host=sim.url)))
    try:
        found = core.read_namespaced_config_map("gpubot-warm", "default")
    except client.ApiException as err:
        assert err.status == 404
        return None
    return dict(found.data or {})


def ephemeral(slack: BackgroundSlack, user: str, words: str) -> str:
    found = slack.wait_until(lambda: [e["text"] for e in slack.ephemerals(user) if words in e["text"]])
    return str(found[-1])


def ops_saying(slack: BackgroundSlack, words: str) -> str:
    found = slack.wait_until(lambda: [m["text"] for m in slack.messages(OPS) if words in m["text"]])
    return str(found[-1])


def gpu_nodes(sim: world.BackgroundWorld) -> int:
    pool_of = "cloud.google.com/gke-nodepool"
    return sum(n["metadata"]["labels"].get(pool_of) == "gpu-pool" for n in sim.nodes())


def test_an_admin_warms_the_pool_for_its_hours_and_it_drains_after(
    warm_bot: runtime.Bot, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    now = sim.world.clock.datetime()
    zone = noon_zone(now)
    text = f"gpu-pool min 1 daily {hours_around(now, zone, before=1, after=30)} {zone}"

    slack.type_command("U_BOB", "C_GPU", "/gpu", f"warm {text}")
    assert "Only gpubot admins" in ephemeral(slack, "U_BOB", "admins")
    assert warm_configmap(sim) is None and gke_pool(sim).autoscaling.min_node_count == 0

    slack.type_command("U_ADMIN", "C_GPU", "/gpu", f"warm {text}")
    added = ephemeral(slack, "U_ADMIN", "Added warm schedule")
    assert "on now, until" in added
    assert warm_configmap(sim) == {"schedules": f"{text}\n"}
    on = ops_saying(slack, "Warm capacity on")
    assert on.startswith(":fire: Warm capacity on: gpu-pool keeps 1 node up until")
    assert gke_pool(sim).autoscaling.min_node_count == 1
    assert sorted(job.id for job in warm_bot.scheduler.get_jobs() if job.id.startswith("warm-")) == [
        "warm-0-0",
        "warm-0-1",
    ]
    assert advance_until(sim, slack, lambda: gpu_nodes(sim) == 1, limit=900), "no warm node came up"

    slack.type_command("U_ALICE", "C_GPU", "/gpu", "status")
    status = ephemeral(slack, "U_ALICE", "Warm schedules")
    assert f"1. `gpu-pool min 1 daily {text.split(' daily ')[1]}` · on now" in status

    sim.advance(31 * 60, step=30)  # past the end edge
    assert [(c.pool, c.before, c.after) for c in warm_bot.warm_now()] == [("gpu-pool", 1, 0)]
    ops_saying(slack, "Warm capacity off: gpu-pool min 1→0")
    assert gke_pool(sim).autoscaling.min_node_count == 0
    assert warm_bot.warm_now() == []  # an edge fired twice changes nothing more
    assert advance_until(sim, slack, lambda: gpu_nodes(sim) == 0, limit=3600, stride=30), (
        "the pool did not drain"
    )

    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm remove 1")
    ephemeral(slack, "U_ADMIN", "Removed warm schedule")
    assert warm_configmap(sim) == {"schedules": ""}
    slack.wait_until(lambda: not [j for j in warm_bot.scheduler.get_jobs() if j.id.startswith("warm-")])
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm")
    assert ephemeral(slack, "U_ADMIN", "No warm schedules").endswith(
        "Add one: `/gpu warm gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin`"
    )


def test_a_removed_schedule_that_was_on_lets_the_pool_fall_back_to_zero(
    warm_bot: runtime.Bot, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    now = sim.world.clock.datetime()
    zone = noon_zone(now)
    slack.type_command(
        "U_ADMIN",
        "C_GPU",
        "/gpu",
        f"warm gpu-pool min 2 daily {hours_around(now, zone, before=5, after=60)} {zone}",
    )
    ops_saying(slack, "Warm capacity on: gpu-pool keeps 2 nodes")
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm rm 1")
    ops_saying(slack, "Warm capacity off: gpu-pool min 2→0")
    assert gke_pool(sim).autoscaling.min_node_count == 0


def test_refusals_change_nothing(
    warm_bot: runtime.Bot, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm no-such-pool min 1 daily 09:00-10:00 UTC")
    assert "no pool named no-such-pool" in ephemeral(slack, "U_ADMIN", "no-such-pool")
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm remove 3")
    assert "There is no warm schedule 3" in ephemeral(slack, "U_ADMIN", "no warm schedule 3")
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm gpu-pool min 1 someday 09:00-10:00 UTC")
    assert "is not a set of days" in ephemeral(slack, "U_ADMIN", "someday")
    assert warm_configmap(sim) is None
    assert gke_pool(sim).autoscaling.min_node_count == 0


def test_without_a_cloud_schedules_cannot_be_added_and_say_what_to_set(
    bot: runtime.Bot, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "warm gpu-pool min 1 daily 09:00-10:00 UTC")
    assert "set GPUBOT_CLOUD" in ephemeral(slack, "U_ADMIN", "GPUBOT_CLOUD")
    assert warm_configmap(sim) is None


def test_gpu_doctor_is_for_admins_and_answers_with_every_check(
    warm_bot: runtime.Bot, sim: world.BackgroundWorld, slack: BackgroundSlack
) -> None:
    slack.type_command("U_BOB", "C_GPU", "/gpu", "doctor")
    assert "Only gpubot admins can run `/gpu doctor`" in ephemeral(slack, "U_BOB", "/gpu doctor")
    slack.type_command("U_ADMIN", "C_GPU", "/gpu", "doctor")
    report = ephemeral(slack, "U_ADMIN", "*gpubot doctor*")
    for name in ("pool-sizing", "pool-taint", "profile-tolerations", "gpu-advertising", "permissions"):
        assert f"*{name}*" in report, report
    assert ":white_check_mark: *permissions*: all 18 permissions" in report
    assert report.splitlines()[-1].endswith("skipped")
    assert ":x:" not in report, report
