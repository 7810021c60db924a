"""SelfSubjectAccessReview on the embedded cluster, asked by the real client and by `kubectl auth can-i`."""

from __future__ import annotations

import email.utils
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.cluster import world

KUBECTL = shutil.which("kubectl")


def may(api: client.ApiClient, verb: str, resource: str, *, namespace: str = "", group: str = "") -> Any:
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, resource=resource, group=group, namespace=namespace or None
            )
        )
    )
    return client.AuthorizationV1Api(api).create_self_subject_access_review(review).status


def fault(sim: world.BackgroundWorld, access: dict[str, str], kind: str | None) -> urllib3.BaseHTTPResponse:
    return urllib3.request("POST", f"{sim.url}/simctl/v1/faults", json={"access": access, "kind": kind})


def test_everything_is_allowed_until_a_fault_denies_one_verb(
    sim: world.BackgroundWorld, api_client: client.ApiClient
) -> None:
    assert may(api_client, "create", "pods", namespace="default").allowed is True
    assert may(api_client, "get", "leases", namespace="default", group="coordination.k8s.io").allowed

    answer = fault(sim, {"verb": "create", "resource": "pods", "namespace": "default"}, "deny")
    assert answer.status == 200, answer.data

    denied = may(api_client, "create", "pods", namespace="default")
    assert (denied.allowed, denied.reason) == (False, "no RBAC rule allows it (simulated denial)")
    assert may(api_client, "create", "pods", namespace="ml").allowed, "the denial is for one namespace"
    assert may(api_client, "delete", "pods", namespace="default").allowed, "and for one verb"

    assert fault(sim, {"verb": "create", "resource": "pods", "namespace": "default"}, None).status == 200
    assert may(api_client, "create", "pods", namespace="default").allowed


def test_a_denial_without_namespace_covers_cluster_scope_and_every_namespace(
    sim: world.BackgroundWorld, api_client: client.ApiClient
) -> None:
    assert fault(sim, {"verb": "watch", "resource": "nodes"}, "deny").status == 200
    assert may(api_client, "watch", "nodes").allowed is False
    assert may(api_client, "list", "nodes").allowed is True
    assert fault(sim, {"verb": "get", "resource": "leases"}, "deny").status == 200
    assert may(api_client, "get", "leases", group="coordination.k8s.io").allowed, "another group"


def test_bad_faults_and_reviews_are_refused(sim: world.BackgroundWorld, api_client: client.ApiClient) -> None:
    assert fault(sim, {"verb": "create"}, "deny").status == 400
    assert fault(sim, {"verb": "create", "resource": "pods"}, "allow").status == 400
    answer = urllib3.request(
        "POST",
        f"{sim.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}},
    )
    assert answer.status == 422
    assert answer.json()["message"] == (
        'SelfSubjectAccessReview "" is invalid: spec.resourceAttributes: Invalid value: "null": '
        "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    )
    with pytest.raises(ApiException) as refused:
        client.AuthorizationV1Api(api_client).create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec())
        )
    assert refused.value.status == 422


def test_the_date_header_is_the_simulated_clock(sim: world.BackgroundWorld) -> None:
    def served_at() -> float:
        answer = urllib3.request("GET", f"{sim.url}/api/v1/namespaces")
        return email.utils.parsedate_to_datetime(answer.headers["Date"]).timestamp()

    before = served_at()
    sim.advance(3600, step=60)
    assert served_at() - before == pytest.approx(3600, abs=2)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_auth_can_i(sim: world.BackgroundWorld, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"HOME": str(tmp_path)}

    def can_i(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [
            str(KUBECTL),
            f"--kubeconfig={kubeconfig}",
            f"--cache-dir={tmp_path / 'cache'}",
            "auth",
            "can-i",
        ]
        return subprocess.run(
            [*argv, *args], capture_output=True, text=True, timeout=30, env=env, check=False
        )

    allowed = can_i("create", "pods", "-n", "default")
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "yes"), allowed.stderr
    assert fault(sim, {"verb": "create", "resource": "pods", "namespace": "default"}, "deny").status == 200
    denied = can_i("create", "pods", "-n", "default")
    assert (denied.returncode, denied.stdout.strip()) == (
        1,
        "no - no RBAC rule allows it (simulated denial)",
    ), denied.stderr
