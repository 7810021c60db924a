"""The chart's RBAC installed on the embedded cluster, which enforces it: every Kubernetes call the bot makes
is allowed to its ServiceAccount there, and `gpubot doctor`, run with that account's token, passes its
permission check until the Role loses a verb, then fails naming it.

tests/deploy/test_helm_rbac.py checks the same calls against the rendered objects with a small authorizer of
its own; here the sim's RBAC authorizer (the one that refuses real requests) answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bot.adapters import kube
from sim.cluster import world
from tests.deploy import chart, test_helm_rbac
from tests.integration import test_doctor_cli
from tests.sim import rbackit

RBAC_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def install_rbac(api: client.ApiClient, objects: list[chart.Obj]) -> None:
    """The chart's namespaces, ServiceAccount, roles and bindings, created on the sim by the admin."""
    core = client.CoreV1Api(api)
    existing = {n.metadata.name for n in core.list_namespace().items}
    wanted = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    wanted |= {o["metadata"]["namespace"] for o in objects if "namespace" in o["metadata"]}
    for name in sorted(wanted - existing):
        core.create_namespace({"metadata": {"name": name}})
    for kind in RBAC_KINDS:
        for obj in chart.find(objects, kind):
            rbackit.create(api, obj)


@pytest.mark.parametrize("case", sorted(test_helm_rbac.CASES))
def test_every_kubernetes_call_the_bot_makes_is_allowed_by_the_sim(
    sim: world.BackgroundWorld, api_client: client.ApiClient, case: str
) -> None:
    values, names = test_helm_rbac.CASES[case]
    install_rbac(api_client, chart.render(values))
    calls = test_helm_rbac.client_calls(workload=names["workload"], lease=names["lease"] or "")
    account = f"system:serviceaccount:{names['namespace']}:{names['release']}"
    with rbackit.impersonating_client(sim, account) as api:
        for method in sorted(test_helm_rbac.methods_the_bot_calls()):
            if "lease" in method and names["lease"] is None:
                continue  # without leader election the bot never touches the Lease
            expected = {
                "list_pod_for_all_namespaces": names.get("pods_everywhere", False),
                "connect_get_namespaced_pod_proxy_with_path": names.get("pod_proxy", True),
            }.get(method, True)
            for request in calls[method]:
                if "kueue.x-k8s.io" in request.group:  # Kueue's kinds only when a profile names a queue
                    expected = names.get("kueue", False)
                answer = rbackit.may(
                    api,
                    request.verb,
                    request.resource.split("/")[0],
                    namespace=request.namespace,
                    group=request.group,
                    subresource=request.resource.partition("/")[2],
                    name=request.name,
                )
                assert answer.allowed is expected, f"{method}: {request} → {answer}"
        # and nothing more: what the bot never does stays refused
        assert not rbackit.may(api, "delete", "nodes", name="n").allowed
        assert not rbackit.may(
            api, "get", "secrets", namespace=names["namespace"], name="gpubot-slack"
        ).allowed
        assert not rbackit.may(api, "delete", "pods", namespace="default", name="p").allowed


@pytest.fixture
def bot_kubeconfig(sim: world.BackgroundWorld, api_client: client.ApiClient, tmp_path: Path) -> Path:
    """The chart's defaults installed; a kubeconfig with a token of its ServiceAccount gpubot/gpubot."""
    install_rbac(api_client, chart.render())
    token = rbackit.service_account_token(api_client, "gpubot", "gpubot")
    return rbackit.write_token_kubeconfig(sim, tmp_path / "gpubot.kubeconfig", token)


def test_the_bot_reads_the_cluster_as_its_service_account(bot_kubeconfig: Path) -> None:
    cluster = kube.KubeCluster.from_kubeconfig(str(bot_kubeconfig), namespace="gpubot-workloads")
    assert len(cluster.list_nodes()) == 2
    assert cluster.list_workloads() == []
    assert cluster.read_autoscaler_status() is not None
    # Pods in every namespace are not granted by default: the adapter falls back to its own namespace.
    assert cluster.list_pods_on_nodes([]) == []


def test_doctor_as_the_service_account_passes_until_the_role_loses_a_verb(
    sim: world.BackgroundWorld,
    api_client: client.ApiClient,
    bot_kubeconfig: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in test_doctor_cli.CLEARED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(bot_kubeconfig))
    monkeypatch.setenv("REDIS_URL", redis_url)
    flags = ["--cloud", "gke", "--cluster", world.CLUSTER, "--project", world.PROJECT]
    flags += ["--location", world.LOCATION, "--endpoint", sim.url]

    _, found = test_doctor_cli.doctor(capsys, *flags)
    assert found["permissions"][0].startswith("PASS permissions: all 18 permissions gpubot needs are granted")
    assert not any("forbidden" in line.lower() for lines in found.values() for line in lines)

    rbac = client.RbacAuthorizationV1Api(api_client)
    role: Any = rbac.read_namespaced_role("gpubot", "gpubot-workloads")
    for rule in role.rules:
        if rule.resources == ["pods"]:
            rule.verbs = [v for v in rule.verbs if v != "watch"]
    rbac.replace_namespaced_role("gpubot", "gpubot-workloads", role)

    code, found = test_doctor_cli.doctor(capsys, *flags)
    assert code == 1
    assert found["permissions"][0] == "FAIL permissions: denied: watch pods in gpubot-workloads"
