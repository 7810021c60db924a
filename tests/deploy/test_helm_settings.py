"""The chart's environment, read back by the bot's own `Settings.from_env`.

Every variable the Deployment sets must be one bot/settings.py reads (a misspelt name would be silently
ignored), the default values must be the bot's own defaults, and non-default values must arrive.
"""

from __future__ import annotations

import ast

import pytest

from bot import settings as settings_module
from bot.core import warm
from tests.deploy import chart

READERS = frozenset({"text", "flag", "number", "integer", "require", "setting", "Variable"})
"""`_EnvReader`'s methods, and the field helpers that name a setting's variable beside its field: their
first argument is the variable's name."""


def called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def names_settings_reads() -> set[str]:
    tree = ast.parse((chart.ROOT / "bot" / "settings.py").read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and called(node) in READERS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def settings_from(objects: list[chart.Obj]) -> settings_module.Settings:
    environ = chart.resolve_env(objects, pod_name="gpubot-5d9c7-x2x4q", secrets=chart.EXISTING_SECRETS)
    return settings_module.Settings.from_env(environ)


def test_the_reader_finds_the_names_settings_reads() -> None:
    found = names_settings_reads()
    assert {
        "SLACK_BOT_TOKEN",
        "GPUBOT_SCALE_CHANNEL",
        "GPUBOT_LEADER_LEASE",
        "POD_NAME",
        "REDIS_URL",
    } <= found


@pytest.mark.parametrize("render", sorted(chart.RENDERS))
def test_every_variable_the_deployment_sets_is_read_by_settings(render: str) -> None:
    unknown = set(chart.env_entries(chart.RENDERS[render]())) - names_settings_reads()
    assert not unknown, f"bot/settings.py reads none of {sorted(unknown)}"


def test_default_values_are_the_bots_own_defaults() -> None:
    found = settings_from(chart.render())
    assert found.reaper == settings_module.ReaperSettings()
    assert found.warm == settings_module.WarmSettings() and found.cloud.provider == ""
    assert found.quota == settings_module.QuotaSettings()
    assert found.slack.mode == "socket" and found.slack.scale_channel == ""
    assert found.slack.team_ids == found.slack.enterprise_ids == frozenset()  # learned from auth.test
    assert (found.slack.bot_token, found.slack.app_token) == ("xoxb-test-bot", "xapp-test-app")
    assert found.cluster == settings_module.ClusterSettings(in_cluster=True)
    assert found.cluster.namespace == "gpubot-workloads"
    assert found.leader.enabled and found.leader.lease_name == "gpubot-leader"
    assert found.leader.identity == "gpubot-5d9c7-x2x4q"
    assert found.redis == settings_module.RedisSettings(url="redis://redis:6379/0")
    assert found.profiles.profiles_file == "/etc/gpubot/profiles.yaml"
    assert found.health_port == 8080
    assert (found.log_level, found.log_json) == ("INFO", True)


def test_non_default_values_reach_the_bot() -> None:
    found = settings_from(chart.RENDERS["custom"]())
    assert found.slack.mode == "http" and found.slack.http_port == 3001
    assert found.slack.http_limits == settings_module.HttpLimits(
        max_body_bytes=262144, header_timeout_seconds=2.5, workers=8
    )
    assert (found.slack.bot_token, found.slack.signing_secret) == ("xoxb-made-by-hand", "signing-secret")
    assert found.slack.scale_channel == "C0GPUOPS"
    assert found.slack.team_ids == {"T0ML", "T0RESEARCH"} and found.slack.enterprise_ids == {"E0ACME"}
    assert found.quota == settings_module.QuotaSettings(
        max_gpus_per_user=4, admins=frozenset({"U0ALICE", "U0BOB"})
    )
    reaper = found.reaper
    assert (reaper.default_lease_hours, reaper.max_lease_hours, reaper.max_total_lease_hours) == (2.5, 12, 48)
    assert reaper.dry_run and reaper.idle_threshold_percent == 10 and reaper.idle_window_minutes == 30
    assert reaper.broken_start_minutes == 20
    assert reaper.prometheus_url == chart.CUSTOM["prometheus"]["url"]
    assert reaper.gpu_metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert found.cluster.namespace == "gpu-jobs"
    assert found.leader.lease_name == "ml-gpubot-lease"
    assert found.redis == settings_module.RedisSettings(
        url="redis://:hunter2@redis.data:6379/1", key_prefix="gpubot-prod:"
    )
    assert found.health_port == 9090
    assert (found.log_level, found.log_json) == ("DEBUG", False)
    cloud = found.cloud
    assert (cloud.provider, cloud.cluster_name, cloud.project, cloud.location) == (
        "gke",
        "ml",
        "acme-ml",
        "europe-west4",
    )
    assert [warm.describe(s) for s in found.warm.schedules] == chart.CUSTOM["warm"]["schedules"]
    assert found.warm.configmap == "ml-warm"


def test_http_modes_default_limits_are_the_bots_own() -> None:
    values = {"slack": {"mode": "http", "botToken": "xoxb-test-bot", "signingSecret": "signing-secret"}}
    found = settings_from(chart.render(values))
    assert found.slack.mode == "http" and found.slack.http_limits == settings_module.HttpLimits()


def test_a_bad_value_is_reported_by_the_bot_at_start_up() -> None:
    objects = chart.render({"leases": {"defaultHours": 30}})
    with pytest.raises(settings_module.SettingsError, match="GPUBOT_DEFAULT_LEASE_HOURS=30 exceeds"):
        settings_from(objects)
