"""The chart's workload namespace and pod security, end to end: helm renders the Namespace and the bot's
settings, the sim (with Pod Security admission) takes the Namespace as the API server would, and the pod the
bot builds from those settings is admitted there, while a root profile's pod is refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from bot import profiles as profiles_module
from bot.core import models, podspec
from sim.cluster import world
from tests.deploy import chart
from tests.deploy.test_helm_settings import settings_from

ROOT_PROFILE = {
    "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ],
    "security": {"runAsRoot": True},
}


def namespaces(objects: list[chart.Obj]) -> list[chart.Obj]:
    return [o for o in objects if o["kind"] == "Namespace"]


def test_the_workload_namespace_is_made_apart_and_enforces_restricted() -> None:
    objects = chart.render()
    (namespace,) = namespaces(objects)
    assert (
        namespace["metadata"]["name"]
        == "gpubot-workloads"
        != chart.one(objects, "Deployment")["metadata"]["namespace"]
    )
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "latest"
    assert namespace["metadata"]["annotations"] == {
        "helm.sh/resource-policy": "keep"
    }  # pods outlive uninstall
    # The Slack Secret stays in the bot's namespace, where the workload Role grants nothing.
    assert chart.one(objects, "Secret")["metadata"]["namespace"] == "gpubot"
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "Role"}
    assert roles == {("gpubot-workloads", "gpubot"), ("kube-system", "gpubot-gpubot-autoscaler-status")}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"podSecurity": {"enforce": "baseline", "enforceVersion": "v1.32"}}, {"baseline", "v1.32"}),
        ({"podSecurity": {"enforce": ""}}, set()),
    ],
)
def test_the_enforced_level_is_a_value(values: dict[str, Any], expected: set[str]) -> None:
    (namespace,) = namespaces(chart.render(values))
    found = namespace["metadata"]["labels"]
    assert {v for k, v in found.items() if k.startswith("pod-security.kubernetes.io/")} == expected


@pytest.mark.parametrize(
    "values", [{"createWorkloadNamespace": False}, {"workloadNamespace": ""}], ids=["not created", "release"]
)
def test_no_namespace_when_told_or_when_it_is_the_release_namespace(values: dict[str, Any]) -> None:
    assert namespaces(chart.render(values)) == []


def test_pod_security_values_reach_the_bot() -> None:
    assert settings_from(chart.render()).cluster.pod_security == models.PodSecurity(
        run_as_non_root=True, run_as_user=1000, read_only_root_filesystem=False
    )
    custom = {"podSecurity": {"runAsUser": 2000, "readOnlyRootFilesystem": True}}
    assert settings_from(chart.render(custom)).cluster.pod_security == models.PodSecurity(
        run_as_non_root=True, run_as_user=2000, read_only_root_filesystem=True
    )
    image_user = settings_from(chart.render({"podSecurity": {"runAsUser": None}})).cluster.pod_security
    assert image_user.run_as_user is None and image_user.run_as_non_root


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"podSecurity": {"enforce": "strict"}}, r"podSecurity\.enforce must be one of the following"),
        ({"podSecurity": {"runAsUser": 0}}, r"podSecurity\.runAsUser: Must be greater than or equal to 1"),
        ({"profiles": {"profiles": {"t4": {"security": {"privileged": True}}}}}, "privileged is not allowed"),
        ({"workloadNamespace": "GPU_Jobs"}, r"workloadNamespace: Does not match pattern"),
    ],
)
def test_the_schema_refuses_what_the_bot_would(values: dict[str, Any], message: str) -> None:
    with pytest.raises(chart.HelmError, match=message):
        chart.render(values)


def bot_pod(objects: list[chart.Obj], profile_name: str) -> dict[str, Any]:
    """The pod the bot builds from the chart's settings and profiles, as its launcher does."""
    found = settings_from(objects)
    profiles_yaml = chart.one(objects, "ConfigMap")["data"]["profiles.yaml"]
    profile = profiles_module.load_profile_catalog(profiles_yaml).profiles[profile_name]
    request = models.RunRequest(image="nvidia/cuda:12.4.1-base-ubuntu22.04", command=("sleep", "60"))
    return podspec.build_pod(
        request,
        profile,
        models.Owner("U_ALICE"),
        now=datetime(2026, 12, 6, tzinfo=UTC),
        lease=timedelta(hours=1),
        channel="C_GPU",
        thread_ts=f"1.{profile_name}",
        namespace=found.cluster.namespace,
        security=found.cluster.pod_security,
    )


def test_on_the_sim_the_default_pod_is_admitted_and_a_root_profile_refused(
    sim: world.BackgroundWorld,
) -> None:
    shipped = yaml.safe_load((chart.CHART / "values.yaml").read_text(encoding="utf-8"))["profiles"][
        "profiles"
    ]
    values = {"profiles": {"default": "t4", "profiles": {**shipped, "cuda-root": ROOT_PROFILE}}}
    objects = chart.render(values)
    (namespace,) = namespaces(objects)
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        core = client.CoreV1Api(api)
        core.delete_namespace(
            "gpubot-workloads"
        )  # the sim's default world has it already; the chart's instead
        core.create_namespace(namespace)
        admitted = bot_pod(objects, "t4")
        created = core.create_namespaced_pod("gpubot-workloads", admitted)
        assert created.spec.security_context.run_as_user == 1000
        with pytest.raises(ApiException) as caught:
            core.create_namespaced_pod("gpubot-workloads", bot_pod(objects, "cuda-root"))
    assert caught.value.status == 403
    assert json.loads(caught.value.body)["message"].endswith(
        'violates PodSecurity "restricted:latest": runAsNonRoot != true '
        '(pod or container "workload" must set securityContext.runAsNonRoot=true)'
    )
