"""Pod Security admission in the sim: namespaces labelled `pod-security.kubernetes.io/enforce` refuse pods
as the real API server does, word for word (kubernetes/pod-security-admission v0.32.0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.cluster import world
from tests.sim.test_kubectl import Kubectl

RESTRICTED = "gpubot-workloads"
BARE = """\
apiVersion: v1
kind: Pod
metadata:
  name: cuda
spec:
  containers:
  - name: workload
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
"""
BARE_REFUSAL = (
    'pods "cuda" is forbidden: violates PodSecurity "restricted:latest": '
    'allowPrivilegeEscalation != false (container "workload" must set '
    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "workload" '
    'must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container '
    '"workload" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "workload" '
    'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
)
"""What `kubectl run` of a CUDA image gets in a restricted namespace on a real 1.32 cluster."""


def pod(name: str, pod_context: dict[str, Any], container_context: dict[str, Any] | None = None) -> Any:
    container: dict[str, Any] = {"name": "workload", "image": "busybox:1.36"}
    if container_context is not None:
        container["securityContext"] = container_context
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], "securityContext": pod_context},
    }


COMPLIANT_POD = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
COMPLIANT_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def refusal(core: client.CoreV1Api, namespace: str, body: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, body)
    assert caught.value.status == 403
    status: dict[str, Any] = json.loads(caught.value.body)
    return status


def test_kubectl_create_of_a_bare_pod_is_refused_in_the_restricted_namespace(
    sim: world.BackgroundWorld, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    world.write_kubeconfig(config, sim.url)
    kubectl = Kubectl(config, tmp_path / "cache", tmp_path)
    labels = kubectl.ok("get", "namespace", RESTRICTED, "-o", "jsonpath={.metadata.labels}")
    assert json.loads(labels)["pod-security.kubernetes.io/enforce"] == "restricted"
    result = kubectl.run("-n", RESTRICTED, "create", "-f", "-", stdin=BARE)
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f'Error from server (Forbidden): error when creating "STDIN": {BARE_REFUSAL}'
    )
    assert kubectl.ok("-n", "default", "create", "-f", "-", stdin=BARE).strip() == "pod/cuda created"


def test_the_refusal_is_a_forbidden_status(core: client.CoreV1Api) -> None:
    status = refusal(core, RESTRICTED, pod("cuda", {}))
    assert status["reason"] == "Forbidden" and status["code"] == 403
    assert status["details"] == {"name": "cuda", "kind": "pods"}
    assert core.list_namespaced_pod(RESTRICTED).items == []


def test_a_compliant_pod_is_admitted(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(RESTRICTED, pod("ok", COMPLIANT_POD, COMPLIANT_CONTAINER))
    assert created.metadata.name == "ok"


@pytest.mark.parametrize(
    ("pod_context", "container_context", "detail"),
    [
        (
            {**COMPLIANT_POD, "runAsNonRoot": False, "runAsUser": 0},
            COMPLIANT_CONTAINER,
            "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), "
            "runAsUser=0 (pod must not set runAsUser=0)",
        ),
        (
            COMPLIANT_POD,
            {
                **COMPLIANT_CONTAINER,
                "privileged": True,
                "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
            },
            'privileged (container "workload" must not set securityContext.privileged=true), '
            'unrestricted capabilities (container "workload" must not include "SYS_ADMIN" in '
            "securityContext.capabilities.add)",
        ),
        (
            {**COMPLIANT_POD, "seccompProfile": {"type": "Unconfined"}},
            COMPLIANT_CONTAINER,
            'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
        ),
    ],
)
def test_each_check_words_its_finding_as_upstream(
    core: client.CoreV1Api, pod_context: dict[str, Any], container_context: dict[str, Any], detail: str
) -> None:
    status = refusal(core, RESTRICTED, pod("p", pod_context, container_context))
    assert status["message"] == f'pods "p" is forbidden: violates PodSecurity "restricted:latest": {detail}'


def test_levels_and_versions_come_from_the_namespace_labels(core: client.CoreV1Api) -> None:
    labels = {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "v1.32",
    }
    core.create_namespace({"metadata": {"name": "roots", "labels": labels}})
    # baseline admits a root pod that holds no privilege, and refuses a privileged one.
    assert core.create_namespaced_pod("roots", pod("root", {}, COMPLIANT_CONTAINER)).metadata.name == "root"
    status = refusal(core, "roots", pod("priv", {}, {"privileged": True}))
    assert status["message"] == (
        'pods "priv" is forbidden: violates PodSecurity "baseline:v1.32": '
        'privileged (container "workload" must not set securityContext.privileged=true)'
    )
    # Labelling a namespace later turns enforcement on for the pods created after.
    core.patch_namespace(
        "default", {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    assert "violates PodSecurity" in refusal(core, "default", pod("late", {}))["message"]


def test_an_unknown_level_is_refused_on_the_namespace(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespace(
            {"metadata": {"name": "typo", "labels": {"pod-security.kubernetes.io/enforce": "strict"}}}
        )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'Namespace "typo" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: '
        '"strict": must be one of privileged, baseline, restricted'
    )
