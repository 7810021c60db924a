"""Settings from the environment (one place, every problem at once) and the GPU profiles file."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from bot import settings
from bot.core import models

REPO = Path(__file__).resolve().parents[2]
SOCKET_ENV = {"SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_APP_TOKEN": "xapp-secret"}


def test_defaults_in_socket_mode() -> None:
    loaded = settings.Settings.from_env(SOCKET_ENV)
    assert loaded.reaper_policy().broken_start == timedelta(minutes=10)
    assert loaded.slack.mode == "socket"
    assert loaded.slack.api_base_url == "https://slack.com/api/"
    assert loaded.cluster == settings.ClusterSettings()
    assert loaded.redis.url == "redis://localhost:6379/0"
    assert loaded.log_json and loaded.health_port == 8080  # `gpubot serve` logs JSON unless told otherwise
    assert loaded.policy() == models.QuotaPolicy(
        max_gpus_per_user=2, default_lease_hours=4, max_lease_hours=24
    )


def test_everything_from_the_environment() -> None:
    loaded = settings.Settings.from_env(
        {
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_SIGNING_SECRET": "shh",
            "SLACK_MODE": "HTTP",
            "SLACK_API_URL": "http://127.0.0.1:4000/api",
            "PORT": "8080",
            "GPUBOT_SCALE_CHANNEL": "C0OPS",
            "KUBECONFIG": "/tmp/kubeconfig",
            "GPUBOT_NAMESPACE": "ml",
            "REDIS_URL": "redis://:pw@redis:6379/1",
            "GPUBOT_DEFAULT_LEASE_HOURS": "2",
            "GPUBOT_MAX_LEASE_HOURS": "8",
            "GPUBOT_REAPER_DRY_RUN": "yes",
            "GPUBOT_BROKEN_START_MINUTES": "20",
            "GPUBOT_MAX_GPUS_PER_USER": "4",
            "GPUBOT_ADMINS": "U0ADMIN, U0OTHER",
            "GPUBOT_PROFILES_FILE": "deploy/profiles.yaml",
            "LOG_LEVEL": "debug",
            "GPUBOT_LOG_FORMAT": "text",
            "GPUBOT_HEALTH_PORT": "9090",
        }
    )
    assert loaded.slack.mode == "http" and loaded.slack.http_port == 8080
    assert loaded.slack.api_base_url == "http://127.0.0.1:4000/api/"
    assert loaded.slack.scale_channel == "C0OPS"
    assert loaded.cluster == settings.ClusterSettings(kubeconfig="/tmp/kubeconfig", namespace="ml")
    assert loaded.reaper.dry_run and loaded.reaper.max_lease_hours == 8
    assert loaded.reaper.broken_start_minutes == 20
    assert loaded.reaper_policy().broken_start == timedelta(minutes=20)
    assert loaded.policy() == models.QuotaPolicy(
        max_gpus_per_user=4,
        default_lease_hours=2,
        max_lease_hours=8,
        admins=frozenset({"U0ADMIN", "U0OTHER"}),
    )
    assert loaded.policy().is_admin("U0ADMIN") and not loaded.policy().is_admin("U01ALICE")
    assert loaded.log_level == "DEBUG" and not loaded.log_json and loaded.health_port == 9090


def test_in_cluster_is_the_default_inside_kubernetes() -> None:
    inside = settings.Settings.from_env({**SOCKET_ENV, "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert inside.cluster.in_cluster
    with_kubeconfig = settings.Settings.from_env(
        {**SOCKET_ENV, "KUBERNETES_SERVICE_HOST": "x", "KUBECONFIG": "k"}
    )
    assert not with_kubeconfig.cluster.in_cluster


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(settings.SettingsError) as raised:
        settings.Settings.from_env(
            {
                "SLACK_MODE": "carrier-pigeon",
                "GPUBOT_MAX_GPUS_PER_USER": "lots",
                "GPUBOT_DEFAULT_LEASE_HOURS": "nan",
                "GPUBOT_MAX_LEASE_HOURS": "-1",
                "GPUBOT_REAPER_DRY_RUN": "perhaps",
                "GPUBOT_NAMESPACE": "Not_Valid",
                "PORT": "99999",
                "SLACK_API_URL": "slack.com",
                "LOG_LEVEL": "chatty",
                "GPUBOT_LOG_FORMAT": "xml",
                "GPUBOT_HEALTH_PORT": "http",
                "GPUBOT_BROKEN_START_MINUTES": "0",
            }
        )
    message = str(raised.value)
    for expected in (
        "SLACK_MODE='carrier-pigeon'",
        "SLACK_BOT_TOKEN is not set (the bot token, xoxb-",
        "SLACK_APP_TOKEN is not set (Socket Mode's app-level token, xapp-",
        "GPUBOT_MAX_GPUS_PER_USER='lots': expected a whole number",
        "GPUBOT_DEFAULT_LEASE_HOURS='nan'",
        "GPUBOT_MAX_LEASE_HOURS='-1'",
        "GPUBOT_REAPER_DRY_RUN='perhaps'",
        "GPUBOT_NAMESPACE='Not_Valid'",
        "PORT='99999'",
        "SLACK_API_URL='slack.com'",
        "LOG_LEVEL='CHATTY'",
        "GPUBOT_LOG_FORMAT='xml': expected json or text",
        "GPUBOT_HEALTH_PORT='http': expected a whole number",
        "GPUBOT_BROKEN_START_MINUTES='0'",
    ):
        assert expected in message


def test_the_problems_also_come_one_by_one_for_a_one_line_message() -> None:
    with pytest.raises(settings.SettingsError) as raised:
        settings.Settings.from_env({"SLACK_MODE": "http", "SLACK_BOT_TOKEN": "x", "PORT": "web"})
    assert [p.split(" ")[0] for p in raised.value.problems] == ["SLACK_SIGNING_SECRET", "PORT='web':"]
    assert raised.value.one_line() == "; ".join(raised.value.problems)
    assert "\n" not in raised.value.one_line()


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"SLACK_MODE": "http", "SLACK_BOT_TOKEN": "x"}, "SLACK_SIGNING_SECRET is not set \\(HTTP mode's"),
        ({**SOCKET_ENV, "GPUBOT_DEFAULT_LEASE_HOURS": "30"}, "exceeds GPUBOT_MAX_LEASE_HOURS=24"),
        (
            {"SLACK_MODE": "http", "SLACK_BOT_TOKEN": "x", "SLACK_SIGNING_SECRET": "s", "PORT": "8080"},
            "GPUBOT_HEALTH_PORT=8080 is Slack's HTTP port too",
        ),
        ({**SOCKET_ENV, "GPUBOT_CLOUD": "azure"}, "GPUBOT_CLOUD='azure': expected gke or eks"),
        ({**SOCKET_ENV, "GPUBOT_CLOUD": "eks"}, "GPUBOT_CLOUD=eks needs GPUBOT_CLOUD_CLUSTER"),
        (
            {**SOCKET_ENV, "GPUBOT_CLOUD": "gke", "GPUBOT_CLOUD_CLUSTER": "c"},
            "GPUBOT_CLOUD=gke needs GPUBOT_GKE_PROJECT and GPUBOT_GKE_LOCATION",
        ),
        (
            {**SOCKET_ENV, "GPUBOT_WARM_SCHEDULES": "gpu-pool min 1 daily 09:00-10:00 UTC"},
            "GPUBOT_WARM_SCHEDULES needs GPUBOT_CLOUD",
        ),
        (
            {
                **SOCKET_ENV,
                "GPUBOT_CLOUD": "eks",
                "GPUBOT_CLOUD_CLUSTER": "c",
                "GPUBOT_WARM_SCHEDULES": "p 1",
            },
            "GPUBOT_WARM_SCHEDULES: `p 1` is not a schedule",
        ),
    ],
)
def test_mode_and_lease_consistency(env: dict[str, str], problem: str) -> None:
    with pytest.raises(settings.SettingsError, match=problem):
        settings.Settings.from_env(env)


def test_redacted_hides_secrets() -> None:
    loaded = settings.Settings.from_env(
        {
            **SOCKET_ENV,
            "SLACK_SIGNING_SECRET": "sig",
            "REDIS_URL": "redis://user:hunter2@redis:6379/0",
            "GPUBOT_PROMETHEUS_URL": "https://gpu:prom-pass@prometheus.example:9090",
            "GPUBOT_GKE_ENDPOINT": "http://me:gke-pass@127.0.0.1:8080",
        }
    )
    shown = loaded.redacted()
    text = repr(shown) + repr(loaded)
    for secret in ("xoxb-secret", "xapp-secret", "hunter2", "'sig'", "prom-pass"):
        assert secret not in text
    assert shown["cloud"]["gke_endpoint"] == "http://me:***@127.0.0.1:8080"
    assert shown["slack"]["bot_token"] == "***"
    assert shown["redis"]["url"] == "redis://user:***@redis:6379/0"
    assert shown["reaper"]["prometheus_url"] == "https://gpu:***@prometheus.example:9090"
    assert loaded.reaper.prometheus_url == "https://gpu:prom-pass@prometheus.example:9090"  # masked in logs
    assert settings.redact_url("redis://localhost:6379") == "redis://localhost:6379"


def test_leader_election_settings() -> None:
    default = settings.Settings.from_env(SOCKET_ENV).leader
    assert default.lease_name == "gpubot-leader" and default.identity == settings.default_identity()
    timings = (default.lease_duration_seconds, default.renew_deadline_seconds, default.retry_period_seconds)
    assert timings == (30, 20, 8)
    env = {**SOCKET_ENV, "GPUBOT_LEADER_LEASE": "ml.gpubot", "POD_NAME": "gpubot-7c9"}
    named = settings.Settings.from_env(env).leader
    assert (named.lease_name, named.identity) == ("ml.gpubot", "gpubot-7c9")
    with pytest.raises(settings.SettingsError, match="GPUBOT_LEADER_LEASE='Bad_Name': not a valid Lease"):
        settings.Settings.from_env({**SOCKET_ENV, "GPUBOT_LEADER_LEASE": "Bad_Name"})


def test_leader_timings_come_from_the_env_and_must_work_together() -> None:
    env = {**SOCKET_ENV, "GPUBOT_LEADER_LEASE_SECONDS": "15", "GPUBOT_LEADER_RENEW_DEADLINE_SECONDS": "10"}
    fast = settings.Settings.from_env({**env, "GPUBOT_LEADER_RETRY_SECONDS": "2"}).leader
    timings = (fast.lease_duration_seconds, fast.renew_deadline_seconds, fast.retry_period_seconds)
    assert timings == (15, 10, 2)
    with pytest.raises(settings.SettingsError, match=r"renew deadline \(10 s\) must be more than 1.2 x"):
        settings.Settings.from_env({**env, "GPUBOT_LEADER_RETRY_SECONDS": "9"})
    with pytest.raises(settings.SettingsError, match="GPUBOT_LEADER_LEASE_SECONDS='soon': expected a whole"):
        settings.Settings.from_env({**SOCKET_ENV, "GPUBOT_LEADER_LEASE_SECONDS": "soon"})


def test_warm_schedules_from_the_environment() -> None:
    env = {
        **SOCKET_ENV,
        "GPUBOT_CLOUD": "eks",
        "GPUBOT_CLOUD_CLUSTER": "ml",
        "GPUBOT_WARM_SCHEDULES": (
            "# office hours\ngpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin; a min 2 sat 10:00-12:00 UTC"
        ),
    }
    found = settings.Settings.from_env(env)
    assert [s.pool for s in found.warm.schedules] == ["gpu-pool", "a"]
    assert found.warm.configmap == "gpubot-warm"
    assert (found.cloud.provider, found.cloud.cluster_name) == ("eks", "ml")


def test_http_limits_from_the_environment() -> None:
    assert settings.Settings.from_env(SOCKET_ENV).slack.http_limits == settings.HttpLimits()
    loaded = settings.Settings.from_env(
        {
            **SOCKET_ENV,
            "GPUBOT_HTTP_MAX_BODY_BYTES": "262144",
            "GPUBOT_HTTP_HEADER_TIMEOUT_SECONDS": "2.5",
            "GPUBOT_HTTP_BODY_TIMEOUT_SECONDS": "30",
            "GPUBOT_HTTP_WORKERS": "8",
            "GPUBOT_HTTP_QUEUE": "32",
        }
    )
    assert loaded.slack.http_limits == settings.HttpLimits(
        max_body_bytes=262144, header_timeout_seconds=2.5, body_timeout_seconds=30, workers=8, queue=32
    )
    assert loaded.redacted()["slack"]["http_limits"]["workers"] == 8
    with pytest.raises(settings.SettingsError) as refused:
        settings.Settings.from_env(
            {**SOCKET_ENV, "GPUBOT_HTTP_WORKERS": "0", "GPUBOT_HTTP_MAX_BODY_BYTES": "1e9"}
        )
    assert [p.split("=")[0] for p in refused.value.problems] == [
        "GPUBOT_HTTP_MAX_BODY_BYTES",
        "GPUBOT_HTTP_WORKERS",
    ]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("at http://gpu:s3cret@prom:9090/api", "at http://gpu:***@prom:9090/api"),
        ("redis://:pw@redis:6379/0 and https://u:p@x", "redis://:***@redis:6379/0 and https://u:***@x"),
        ("http://gpu:p@ss@prom:9090", "http://gpu:***@prom:9090"),
        ("no password: http://gpu@prom:9090 http://prom:9090/a:b@c", None),
        ("plain words: a:b@c", None),
    ],
)
def test_redact_urls_in_masks_every_password_in_free_text(text: str, shown: str | None) -> None:
    assert settings.redact_urls_in(text) == (text if shown is None else shown)


@pytest.mark.parametrize(
    ("url", "bare", "credentials"),
    [
        ("http://gpu:s%40cret@prom:9090/p", "http://prom:9090/p", "gpu:s@cret"),
        ("https://token@prom", "https://prom", "token:"),
        ("http://prom:9090", "http://prom:9090", ""),
    ],
)
def test_strip_credentials_splits_the_userinfo_off(url: str, bare: str, credentials: str) -> None:
    assert settings.strip_credentials(url) == (bare, credentials)


def test_the_served_workspaces_are_comma_lists_of_slack_ids() -> None:
    found = settings.Settings.from_env(
        {**SOCKET_ENV, "GPUBOT_SLACK_TEAM_IDS": "T0ML, T0RESEARCH", "GPUBOT_SLACK_ENTERPRISE_IDS": "E0ACME"}
    ).slack
    assert (found.team_ids, found.enterprise_ids) == ({"T0ML", "T0RESEARCH"}, {"E0ACME"})
    learned = settings.Settings.from_env(SOCKET_ENV).slack
    assert learned.team_ids == learned.enterprise_ids == frozenset()  # from auth.test at start-up
    with pytest.raises(settings.SettingsError) as raised:
        settings.Settings.from_env(
            {**SOCKET_ENV, "GPUBOT_SLACK_TEAM_IDS": "U0ALICE,t0ml", "GPUBOT_SLACK_ENTERPRISE_IDS": "T0ML"}
        )
    assert raised.value.problems == (
        "GPUBOT_SLACK_TEAM_IDS: 'U0ALICE', 't0ml' not like T0123ABCD (a Slack id)",
        "GPUBOT_SLACK_ENTERPRISE_IDS: 'T0ML' not like E0123ABCD (a Slack id)",
    )


SECTIONS = (
    settings.HttpLimits,
    settings.SlackSettings,
    settings.ClusterSettings,
    settings.RedisSettings,
    settings.ReaperSettings,
    settings.QuotaSettings,
    settings.ProfileSettings,
    settings.CloudSettings,
    settings.WarmSettings,
    settings.LeaderSettings,
    settings.Settings,
)
NESTED = frozenset({"http_limits", "pod_security", *(f.name for f in dataclasses.fields(settings.Settings))})
"""Fields that hold a section (or the core's PodSecurity, read from GPUBOT_RUN_AS_*), not one variable."""


def test_each_setting_names_its_variable_beside_its_field() -> None:
    for section in SECTIONS:
        for spec in dataclasses.fields(section):
            if spec.name in NESTED and settings.ENV not in spec.metadata:
                continue
            found = spec.metadata[settings.ENV]
            assert found.name and found.name == found.name.upper(), (section.__name__, spec.name)


def test_unset_variables_give_each_fields_own_default() -> None:
    loaded = settings.Settings.from_env(SOCKET_ENV)
    assert loaded.slack == settings.SlackSettings(bot_token="xoxb-secret", app_token="xapp-secret")
    assert loaded.reaper == settings.ReaperSettings() and loaded.quota == settings.QuotaSettings()
    assert loaded.redis == settings.RedisSettings() and loaded.cloud == settings.CloudSettings()
    assert loaded.profiles == settings.ProfileSettings() and loaded.warm == settings.WarmSettings()
    assert dataclasses.replace(loaded.leader, identity="") == settings.LeaderSettings(identity="")
    assert (loaded.log_level, loaded.health_port) == ("INFO", settings.Settings.health_port)


def test_a_number_out_of_its_fields_bounds_is_refused_with_them() -> None:
    bounds = settings.variable(settings.HttpLimits, "workers")
    assert (bounds.name, bounds.minimum, bounds.maximum) == ("GPUBOT_HTTP_WORKERS", 1, 256)
    with pytest.raises(settings.SettingsError) as raised:
        settings.Settings.from_env({**SOCKET_ENV, "GPUBOT_HTTP_WORKERS": "257"})
    assert raised.value.problems == ("GPUBOT_HTTP_WORKERS='257': expected a number from 1 to 256",)
