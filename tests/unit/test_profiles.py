"""GPU profiles: the built-in catalogue, the shipped file, and every problem a profiles file can have."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import profiles, settings
from bot.core import models

REPO = Path(__file__).resolve().parents[2]
SOCKET_ENV = {"SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_APP_TOKEN": "xapp-secret"}


def test_the_problems_also_come_on_one_line() -> None:
    with pytest.raises(settings.SettingsError) as raised:
        profiles.load_profile_catalog("profiles:\n  t4: {maxCount: 0, pricePerHour: -1}\n")
    assert raised.value.one_line().startswith("invalid GPU profiles: profiles.t4.maxCount: must be")
    assert "; profiles.t4.pricePerHour:" in raised.value.one_line()


def test_shipped_profiles_match_the_seed_pool() -> None:
    catalog = profiles.load_profile_catalog((REPO / "deploy" / "profiles.yaml").read_text())
    assert catalog.default == "t4" and set(catalog.profiles) == {"t4", "notebook", "a100"}
    builtin = profiles.load_profile_catalog(profiles.BUILTIN_PROFILES_YAML).profiles
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
    builtin = profiles.read_profile_catalog(settings.Settings.from_env(SOCKET_ENV))
    assert list(builtin.profiles) == ["t4", "notebook"]
    from_file = profiles.read_profile_catalog(
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
        profiles.read_profile_catalog(missing)


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
        ("extra: 1\nprofiles:\n  p: {}\n", '(top level): unknown field "extra" — known: default, profiles'),
        ("default: v100\nprofiles:\n  p: {}\n", "default: 'v100' is not one of the profiles"),
        (_profile("maxGpus: 2"), 'unknown field "maxGpus" — did you mean "maxCount"?'),
        (_profile("maxcount: 2"), 'unknown field "maxcount" — did you mean "maxCount"?'),
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
            'unknown field "important" — did you mean "key"?',
        ),
        (
            _profile("tolerations: [{key: k, operator: Same}]"),
            'tolerations[0].operator: Unsupported value: "Same": supported values: "Equal", "Exists"',
        ),
        (
            _profile("tolerations: [{key: k, operator: Exists, value: v}]"),
            "tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
        ),
        (
            _profile("tolerations: [{value: v}]"),
            'tolerations[0].operator: Invalid value: "": operator must be Exists when `key` is empty',
        ),
        (
            _profile("tolerations: [{key: 'bad key'}]"),
            'tolerations[0].key: Invalid value: "bad key": name part must consist of alphanumeric',
        ),
        (
            _profile("tolerations: [{key: k, effect: NoRun}]"),
            'tolerations[0].effect: Unsupported value: "NoRun": supported values: "NoSchedule"',
        ),
        (
            _profile("tolerations: [{key: k, effect: NoSchedule, tolerationSeconds: 5}]"),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (_profile("nodeSelector: [a]"), "nodeSelector: must be a mapping"),
        (_profile("nodeSelector: {gpu: true}"), "quote numbers and booleans"),
        (_profile("nodeSelector: {'bad key': x}"), "is not a valid label key"),
        (_profile("defaults: {cpu: lots}"), "defaults.cpu: 'lots' is not a CPU amount"),
        (_profile("defaults: {memory: 8GB}"), "defaults.memory: '8GB' is not a memory amount"),
        (_profile("defaults: {gpu: 1}"), 'defaults: unknown field "gpu"'),
        (_profile("image: 'NVIDIA/cuda'"), "profiles.p.image: "),
        (_profile("ports: 8888"), "profiles.p.ports: must be a list of port numbers"),
        (_profile("ports: [0]"), "profiles.p.ports: ports are distinct numbers from 1 to 65535"),
        (_profile("ports: [8888, 8888]"), "profiles.p.ports: ports are distinct numbers"),
        (_profile("ports: [1, 2, 3, 4, 5, 6, 7, 8, 9]"), "profiles.p.ports: at most 8 ports"),
        (_profile("activity: kernels"), "profiles.p.activity: must be one of jupyter, not 'kernels'"),
    ],
)
def test_bad_profiles_are_refused_with_their_path(yaml_text: str, problem: str) -> None:
    with pytest.raises(settings.SettingsError) as raised:
        profiles.load_profile_catalog(yaml_text)
    assert problem in str(raised.value)


def test_all_profile_problems_come_together() -> None:
    with pytest.raises(settings.SettingsError) as raised:
        profiles.load_profile_catalog(_profile("maxCount: 0\npricePerHour: x\nresource: gpu"))
    assert str(raised.value).count("profiles.p.") == 3


def test_a_profile_may_name_its_image_and_ports() -> None:
    profile = profiles.load_profile_catalog(
        _profile("image: quay.io/jupyter/base-notebook\nports: [8888, 6006]")
    ).profiles["p"]
    assert (profile.image, profile.ports) == ("quay.io/jupyter/base-notebook", (8888, 6006))


def test_the_notebook_profile_reads_its_jupyter_and_others_their_gpu_alone() -> None:
    shipped = profiles.load_profile_catalog(profiles.BUILTIN_PROFILES_YAML).profiles
    assert {name: p.activity for name, p in shipped.items()} == {"t4": "", "notebook": "jupyter"}
    assert profiles.load_profile_catalog(_profile("activity: jupyter")).profiles["p"].activity == "jupyter"


def test_minimal_profile_gets_defaults() -> None:
    profile = profiles.load_profile_catalog("profiles:\n  p: {defaults: {cpu: 4}}\n").profiles["p"]
    assert profile == models.GpuProfile(name="p", default_cpu_millis=4000)
