"""The securityContext decision: restricted by default, root only for a profile that says so."""

from __future__ import annotations

from typing import Any

import pytest

from bot import profiles as profiles_module
from bot import settings
from bot.core import models, podsecurity

DEFAULTS = models.PodSecurity()
ROOT = models.ProfileSecurity(run_as_root=True)


@pytest.mark.parametrize(
    ("defaults", "profile", "expected"),
    [
        (DEFAULTS, models.ProfileSecurity(), podsecurity.SecurityDecision(True, 1000, False)),
        (DEFAULTS, ROOT, podsecurity.SecurityDecision(False, None, False)),
        (DEFAULTS, models.ProfileSecurity(run_as_user=1001), podsecurity.SecurityDecision(True, 1001, False)),
        (
            DEFAULTS,
            models.ProfileSecurity(read_only_root_filesystem=True),
            podsecurity.SecurityDecision(True, 1000, True),
        ),
        (
            models.PodSecurity(read_only_root_filesystem=True),
            models.ProfileSecurity(run_as_root=True, read_only_root_filesystem=False),
            podsecurity.SecurityDecision(False, None, False),
        ),
        (
            models.PodSecurity(run_as_non_root=False, run_as_user=None),
            models.ProfileSecurity(),
            podsecurity.SecurityDecision(False, None, False),
        ),
        (
            models.PodSecurity(run_as_user=4242),
            models.ProfileSecurity(),
            podsecurity.SecurityDecision(True, 4242, False),
        ),
    ],
)
def test_decide(
    defaults: models.PodSecurity, profile: models.ProfileSecurity, expected: podsecurity.SecurityDecision
) -> None:
    assert podsecurity.decide(defaults, profile) == expected


def test_the_default_contexts_are_what_restricted_asks_for() -> None:
    decision = podsecurity.decide(DEFAULTS, models.ProfileSecurity())
    assert podsecurity.pod_context(decision) == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 1000,
    }
    assert podsecurity.container_context(decision) == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_a_root_profile_keeps_every_other_restriction() -> None:
    decision = podsecurity.decide(DEFAULTS, ROOT)
    assert podsecurity.pod_context(decision) == {"seccompProfile": {"type": "RuntimeDefault"}}
    container = podsecurity.container_context(decision)
    assert container["allowPrivilegeEscalation"] is False and container["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize(
    ("raw", "expected", "problem"),
    [
        (None, models.ProfileSecurity(), None),
        ({"runAsRoot": True}, ROOT, None),
        (
            {"runAsUser": 1001, "readOnlyRootFilesystem": True},
            models.ProfileSecurity(False, 1001, True),
            None,
        ),
        ({"runAsUser": 0}, models.ProfileSecurity(), "0 is runAsRoot"),
        ({"runAsUser": "1000"}, models.ProfileSecurity(), "must be a uid"),
        ({"runAsRoot": "yes"}, models.ProfileSecurity(), "must be true or false"),
        ({"runAsRoot": True, "runAsUser": 5}, models.ProfileSecurity(True, 5), "contradicts runAsRoot"),
        ({"privileged": True}, models.ProfileSecurity(), "unknown field 'privileged'"),
        ("root", models.ProfileSecurity(), "must be a mapping"),
    ],
)
def test_read_profile_security(raw: Any, expected: models.ProfileSecurity, problem: str | None) -> None:
    found, problems = podsecurity.read_profile_security(raw, "profiles.t4.security")
    assert found == expected
    if problem is None:
        assert problems == []
    else:
        assert any(problem in text for _, text in problems), problems


PROFILES = """\
profiles:
  cuda-root:
    security: {runAsRoot: true, readOnlyRootFilesystem: false}
  t4:
    security: {runAsUser: 1001}
"""


def test_profiles_file_carries_security() -> None:
    loaded = profiles_module.load_profile_catalog(PROFILES).profiles
    assert loaded["cuda-root"].security == models.ProfileSecurity(
        run_as_root=True, read_only_root_filesystem=False
    )
    assert loaded["t4"].security == models.ProfileSecurity(run_as_user=1001)
    with pytest.raises(settings.SettingsError, match=r"profiles.t4.security.runAsUser"):
        profiles_module.load_profile_catalog("profiles:\n  t4:\n    security: {runAsUser: -1}\n")


def test_settings_default_to_restricted_in_a_namespace_of_their_own() -> None:
    tokens = {"SLACK_BOT_TOKEN": "xoxb-unused", "SLACK_APP_TOKEN": "xapp-unused"}
    cluster = settings.Settings.from_env(tokens).cluster
    assert cluster.namespace == "gpubot-workloads"
    assert cluster.pod_security == models.PodSecurity(run_as_non_root=True, run_as_user=1000)
    image_user = settings.Settings.from_env({**tokens, "GPUBOT_RUN_AS_USER": "image"}).cluster
    assert image_user.pod_security.run_as_user is None


def test_a_refusal_is_explained_with_the_profile_and_namespace() -> None:
    message = 'pods "gpu-x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'
    assert podsecurity.is_refusal(message)
    text = podsecurity.explain_refusal(
        message, profile=models.GpuProfile(name="cuda-root", security=ROOT), namespace="gpubot-workloads"
    )
    assert "`cuda-root` profile runs its images as root" in text and "`gpubot-workloads`" in text
    assert text.endswith(message) and "Nothing was created" in text
    assert not podsecurity.is_refusal('pods "x" is forbidden: User "bot" cannot create resource "pods"')
