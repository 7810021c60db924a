"""Settings from the environment (one place, every problem at once) and the GPU profiles file."""

from __future__ import annotations

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
    with pytest.raises(settings.SettingsError) as raised:
        settings.load_profile_catalog("profiles:\n  t4: {maxCount: 0, pricePerHour: -1}\n")
    assert raised.value.one_line().startswith("invalid GPU profiles: profiles.t4.maxCount: must be")
    assert "; profiles.t4.pricePerHour:" in raised.value.one_line()


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


def test_shipped_profiles_match_the_seed_pool() -> None:
    catalog = settings.load_profile_catalog((REPO / "deploy" / "profiles.yaml").read_text())
    assert catalog.default == "t4" and set(catalog.profiles) == {"t4", "notebook", "a100"}
    builtin = settings.load_profiles(settings.BUILTIN_PROFILES_YAML)
    t4 = catalog.profiles["t4"]
    assert t4 == builtin["t4"] and catalog.profiles["notebook"] == builtin["notebook"]
    notebook = catalog.profiles["notebook"]
    assert notebook.image.startswith("quay.io/jupyter/") and notebook.ports == (8888,)
    assert notebook.node_selector == t4.node_selector, "a notebook lands on the seed's pool"
    assert t4.resource_name == "nvidia.com/gpu" and t4.max_count == 1
    assert t4.tolerations == (models.Toleration(key="nvidia.com/gpu", value="present", effect="NoSchedule"),)
    assert t4.node_selector_map == {"app-type": "gpu-workloads"}
    assert (t4.default_cpu_millis, t4.default_memory_bytes) == (2000, 8 * 1024**3)
    assert t4.price_per_hour == pytest.approx(0.54)


def test_read_profile_catalog_uses_file_builtin_and_override(tmp_path: Path) -> None:
    builtin = settings.read_profile_catalog(settings.Settings.from_env(SOCKET_ENV))
    assert list(builtin.profiles) == ["t4", "notebook"]
    from_file = settings.read_profile_catalog(
        settings.Settings.from_env(
            {
                **SOCKET_ENV,
                "GPUBOT_PROFILES_FILE": str(REPO / "deploy/profiles.yaml"),
                "GPUBOT_DEFAULT_PROFILE": "a100",
            }
        )
    )
    assert from_file.default == "a100"
    missing = settings.Settings.from_env({**SOCKET_ENV, "GPUBOT_PROFILES_FILE": str(tmp_path / "nope.yaml")})
    with pytest.raises(settings.SettingsError, match="GPUBOT_PROFILES_FILE"):
        settings.read_profile_catalog(missing)


def _profile(body: str) -> str:
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return f"profiles:\n  p:\n{indented}\n"


@pytest.mark.parametrize(
    ("yaml_text", "problem"),
    [
        ("", "non-empty `profiles:`"),
        ("profiles: {}", "non-empty `profiles:`"),
        ("profiles: [", "not valid YAML"),
        ("profiles:\n  T4: {}\n", "profiles.T4: profile names are lowercase"),
        ("profiles:\n  p: 3\n", "profiles.p: must be a mapping"),
        ("extra: 1\nprofiles:\n  p: {}\n", "(top level): unknown field 'extra'"),
        ("default: v100\nprofiles:\n  p: {}\n", "default: 'v100' is not one of the profiles"),
        (_profile("maxGpus: 2"), "unknown field 'maxGpus' (did you mean 'maxCount'?)"),
        (_profile("maxcount: 2"), "unknown field 'maxcount' (did you mean 'maxCount'?)"),
        (_profile("resource: gpu"), "profiles.p.resource: 'gpu' is not an extended resource"),
        (_profile("maxCount: 0"), "profiles.p.maxCount: must be a whole number from 1 to 16"),
        (_profile("maxCount: two"), "profiles.p.maxCount"),
        (_profile("maxCount: true"), "profiles.p.maxCount"),
        (_profile("pricePerHour: cheap"), "profiles.p.pricePerHour"),
        (_profile("pricePerHour: -1"), "profiles.p.pricePerHour"),
        (_profile("tolerations: {key: x}"), "profiles.p.tolerations: must be a list"),
        (_profile("tolerations: [x]"), "profiles.p.tolerations[0]: must be a mapping"),
        (
            _profile("tolerations: [{important: nvidia.com/gpu, operator: Equal, value: present}]"),
            "unknown field 'important' (did you mean 'key'?)",
        ),
        (
            _profile("tolerations: [{key: k, operator: Same}]"),
            "tolerations[0].operator: must be Equal or Exists",
        ),
        (_profile("tolerations: [{key: k, operator: Exists, value: v}]"), "value: must be empty"),
        (_profile("tolerations: [{value: v}]"), "tolerations[0].key: is required unless operator is Exists"),
        (_profile("tolerations: [{key: 'bad key'}]"), "not a valid taint key"),
        (_profile("tolerations: [{key: k, effect: NoRun}]"), "tolerations[0].effect: must be one of"),
        (
            _profile("tolerations: [{key: k, effect: NoSchedule, tolerationSeconds: 5}]"),
            "only with effect NoExecute",
        ),
        (_profile("nodeSelector: [a]"), "nodeSelector: must be a mapping"),
        (_profile("nodeSelector: {gpu: true}"), "quote numbers and booleans"),
        (_profile("nodeSelector: {'bad key': x}"), "is not a valid label key"),
        (_profile("defaults: {cpu: lots}"), "defaults.cpu: 'lots' is not a CPU amount"),
        (_profile("defaults: {memory: 8GB}"), "defaults.memory: '8GB' is not a memory amount"),
        (_profile("defaults: {gpu: 1}"), "defaults: unknown field 'gpu'"),
        (_profile("image: 'NVIDIA/cuda'"), "profiles.p.image: "),
        (_profile("ports: 8888"), "profiles.p.ports: must be a list of port numbers"),
        (_profile("ports: [0]"), "profiles.p.ports: ports are distinct numbers from 1 to 65535"),
        (_profile("ports: [8888, 8888]"), "profiles.p.ports: ports are distinct numbers"),
        (_profile("ports: [1, 2, 3, 4, 5, 6, 7, 8, 9]"), "profiles.p.ports: at most 8 ports"),
    ],
)
def test_bad_profiles_are_refused_with_their_path(yaml_text: str, problem: str) -> None:
    with pytest.raises(settings.SettingsError) as raised:
        settings.load_profiles(yaml_text)
    assert problem in str(raised.value)


def test_all_profile_problems_come_together() -> None:
    with pytest.raises(settings.SettingsError) as raised:
        settings.load_profiles(_profile("maxCount: 0\npricePerHour: x\nresource: gpu"))
    assert str(raised.value).count("profiles.p.") == 3


def test_a_profile_may_name_its_image_and_ports() -> None:
    profile = settings.load_profiles(_profile("image: quay.io/jupyter/base-notebook\nports: [8888, 6006]"))[
        "p"
    ]
    assert (profile.image, profile.ports) == ("quay.io/jupyter/base-notebook", (8888, 6006))


def test_minimal_profile_gets_defaults() -> None:
    profile = settings.load_profiles("profiles:\n  p: {defaults: {cpu: 4}}\n")["p"]
    assert profile == models.GpuProfile(name="p", default_cpu_millis=4000)


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
