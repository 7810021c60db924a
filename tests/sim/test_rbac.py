"""RBAC on the embedded cluster: stored roles and bindings decide what a ServiceAccount or user may do,
on every request and in every review, and a refusal is the real API server's 403.

Identities come the ways real clients bring them: the admin impersonating (`kubectl --as`, the
`Impersonate-User` header) and ServiceAccount tokens from TokenRequest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bot.adapters import kube
from bot.core import errors
from sim.cluster import world
from tests.sim import rbackit

KUBECTL = shutil.which("kubectl")
READER = "system:serviceaccount:ml:reader"
ALICE = "alice"


@pytest.fixture
def policies(api_client: client.ApiClient) -> client.ApiClient:
    """Namespaces ml and other; a reader ServiceAccount in ml, and the roles the table below asks about."""
    core = client.CoreV1Api(api_client)
    for name in ("ml", "other"):
        core.create_namespace({"metadata": {"name": name}})
    sa = {"kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": "reader", "namespace": "ml"}}
    objects = [
        sa,
        rbackit.role(
            "ClusterRole",
            "pod-reader",
            [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            ],
        ),
        # A ClusterRole bound by a RoleBinding grants in that namespace only; the subject's namespace
        # left out means the binding's own.
        rbackit.binding(
            "RoleBinding",
            "read-pods",
            "ClusterRole",
            "pod-reader",
            [{"kind": "ServiceAccount", "name": "reader"}],
            "ml",
        ),
        rbackit.role(
            "Role",
            "lease-keeper",
            [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "update"],
                    "resourceNames": ["leader"],
                },
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            ],
            "ml",
        ),
        rbackit.binding(
            "RoleBinding",
            "keep-lease",
            "Role",
            "lease-keeper",
            [{"kind": "ServiceAccount", "name": "reader", "namespace": "ml"}],
            "ml",
        ),
        rbackit.role(
            "ClusterRole",
            "status-patcher",
            [{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["patch"]}],
        ),
        rbackit.binding(
            "ClusterRoleBinding",
            "ops-status",
            "ClusterRole",
            "status-patcher",
            [{"kind": "Group", "apiGroup": rbackit.RBAC, "name": "ops"}],
        ),
        rbackit.role(
            "ClusterRole",
            "node-admin",
            [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]},
                {"nonResourceURLs": ["/livez/*"], "verbs": ["get"]},
            ],
        ),
        rbackit.binding(
            "ClusterRoleBinding",
            "alice-nodes",
            "ClusterRole",
            "node-admin",
            [{"kind": "User", "apiGroup": rbackit.RBAC, "name": ALICE}],
        ),
    ]
    for obj in objects:
        rbackit.create(api_client, obj)
    return api_client


# who, verb, resource, namespace, group, subresource, name → allowed
TABLE: list[tuple[tuple[str, ...], str, str, str, str, str, str, bool]] = [
    ((READER,), "list", "pods", "ml", "", "", "", True),
    ((READER,), "get", "pods", "ml", "", "", "p", True),
    ((READER,), "delete", "pods", "ml", "", "", "p", False),  # no such verb
    ((READER,), "list", "pods", "other", "", "", "", False),  # the RoleBinding's namespace only
    ((READER,), "list", "pods", "", "", "", "", False),  # nor every namespace at once
    ((READER,), "get", "pods", "ml", "", "log", "p", True),  # pods/log granted by name
    ((READER,), "create", "pods", "ml", "", "eviction", "p", False),  # another subresource is not
    ((READER,), "get", "pods", "ml", "apps", "", "p", False),  # another API group is not
    ((READER,), "update", "leases", "ml", "coordination.k8s.io", "", "leader", True),
    ((READER,), "update", "leases", "ml", "coordination.k8s.io", "", "other", False),  # resourceNames
    ((READER,), "list", "leases", "ml", "coordination.k8s.io", "", "", False),  # no name on a list
    ((READER,), "create", "leases", "ml", "coordination.k8s.io", "", "", True),
    ((ALICE,), "delete", "nodes", "", "", "", "n", True),  # verbs: ["*"]
    ((ALICE,), "deletecollection", "nodes", "", "", "", "", True),
    ((ALICE,), "get", "nodes", "", "", "status", "n", False),  # `nodes` does not cover nodes/status
    ((ALICE,), "list", "pods", "ml", "", "", "", False),
    (("bob", "ops"), "patch", "pods", "ml", "", "status", "p", True),  # apiGroups ["*"], "*/status"
    (("bob", "ops"), "patch", "leases", "", "coordination.k8s.io", "status", "l", True),
    (("bob", "ops"), "patch", "pods", "ml", "", "", "p", False),
    (("bob",), "patch", "pods", "ml", "", "status", "p", False),  # not in the group
    (("system:serviceaccount:ml:nobody",), "get", "pods", "ml", "", "", "p", False),
    # system:basic-user, bound to system:authenticated: anyone may ask what they may do
    (
        ("system:serviceaccount:ml:nobody",),
        "create",
        "selfsubjectaccessreviews",
        "",
        "authorization.k8s.io",
        "",
        "",
        True,
    ),
    (("nobody",), "create", "selfsubjectreviews", "", "authentication.k8s.io", "", "", True),
]


@pytest.mark.parametrize(("who", "verb", "resource", "namespace", "group", "sub", "name", "allowed"), TABLE)
def test_reviews_follow_rbac(
    sim: world.BackgroundWorld,
    policies: client.ApiClient,
    who: tuple[str, ...],
    verb: str,
    resource: str,
    namespace: str,
    group: str,
    sub: str,
    name: str,
    allowed: bool,
) -> None:
    with rbackit.impersonating_client(sim, *who) as api:
        answer = rbackit.may(
            api, verb, resource, namespace=namespace, group=group, subresource=sub, name=name
        )
    assert answer.allowed is allowed


def test_an_allowed_review_names_the_binding_that_allows_it(
    sim: world.BackgroundWorld, policies: client.ApiClient
) -> None:
    with rbackit.impersonating_client(sim, READER) as api:
        answer = rbackit.may(api, "get", "pods", namespace="ml", subresource="log", name="p")
    assert answer.reason == (
        'RBAC: allowed by RoleBinding "read-pods/ml" of ClusterRole "pod-reader" '
        'to ServiceAccount "reader/ml"'
    )


def test_a_binding_to_a_missing_role_is_the_reason_of_a_denial(
    sim: world.BackgroundWorld, policies: client.ApiClient
) -> None:
    rbackit.create(
        policies,
        rbackit.binding(
            "RoleBinding", "dangling", "Role", "gone", [{"kind": "ServiceAccount", "name": "reader"}], "ml"
        ),
    )
    with rbackit.impersonating_client(sim, READER) as api:
        answer = rbackit.may(api, "delete", "pods", namespace="ml", name="p")
    assert (answer.allowed, answer.reason) == (
        False,
        'RBAC: roles.rbac.authorization.k8s.io "gone" not found',
    )


def forbidden_body(err: ApiException) -> dict[str, Any]:
    assert err.status == 403, err.body
    body: dict[str, Any] = json.loads(err.body)
    return body


def test_a_refused_request_gets_the_real_403(sim: world.BackgroundWorld, policies: client.ApiClient) -> None:
    token = rbackit.service_account_token(policies, "ml", "reader")
    with rbackit.token_client(sim, token) as api:
        core = client.CoreV1Api(api)
        assert core.list_namespaced_pod("ml").items == []  # allowed: it gets through
        with pytest.raises(ApiException) as named:
            core.delete_namespaced_pod("x", "ml")
        with pytest.raises(ApiException) as cluster_wide:
            core.list_node()
        with pytest.raises(ApiException) as grouped:
            client.CoordinationV1Api(api).delete_namespaced_lease("leader", "ml")
    assert forbidden_body(named.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "x" is forbidden: User "system:serviceaccount:ml:reader" cannot delete '
        'resource "pods" in API group "" in the namespace "ml"',
        "reason": "Forbidden",
        "details": {"name": "x", "kind": "pods"},
        "code": 403,
    }
    body = forbidden_body(cluster_wide.value)
    assert body["message"] == (
        'nodes is forbidden: User "system:serviceaccount:ml:reader" cannot list resource "nodes" '
        'in API group "" at the cluster scope'
    )
    assert body["details"] == {"kind": "nodes"}
    body = forbidden_body(grouped.value)
    assert body["message"] == (
        'leases.coordination.k8s.io "leader" is forbidden: User "system:serviceaccount:ml:reader" '
        'cannot delete resource "leases" in API group "coordination.k8s.io" in the namespace "ml"'
    )
    assert body["details"] == {"name": "leader", "group": "coordination.k8s.io", "kind": "leases"}


def test_non_resource_urls_are_authorized_before_routing(
    sim: world.BackgroundWorld, policies: client.ApiClient
) -> None:
    reader = {"Authorization": f"Bearer {rbackit.service_account_token(policies, 'ml', 'reader')}"}
    refused = urllib3.request("GET", f"{sim.url}/livez/etcd", headers=reader)
    assert refused.status == 403
    assert refused.json()["message"] == (
        'forbidden: User "system:serviceaccount:ml:reader" cannot get path "/livez/etcd"'
    )
    # Discovery and /version are every authenticated user's (system:discovery, system:public-info-viewer).
    assert urllib3.request("GET", f"{sim.url}/version", headers=reader).status == 200
    assert urllib3.request("GET", f"{sim.url}/apis", headers=reader).status == 200
    # alice's `/livez/*` lets her through to the router, which serves no such check.
    alice = {"Impersonate-User": ALICE}
    assert urllib3.request("GET", f"{sim.url}/livez/etcd", headers=alice).status == 404
    assert urllib3.request("GET", f"{sim.url}/healthz/etcd", headers=alice).status == 403


def test_tokens_die_with_their_service_account_and_when_they_expire(
    sim: world.BackgroundWorld, policies: client.ApiClient
) -> None:
    short = rbackit.service_account_token(policies, "ml", "reader", seconds=600)
    long = rbackit.service_account_token(policies, "ml", "reader")
    version = f"{sim.url}/version"
    assert urllib3.request("GET", version, headers={"Authorization": f"Bearer {short}"}).status == 200
    sim.advance(601, step=601)
    expired = urllib3.request("GET", version, headers={"Authorization": f"Bearer {short}"})
    assert (expired.status, expired.json()["message"], expired.json()["reason"]) == (
        401,
        "Unauthorized",
        "Unauthorized",
    )
    assert urllib3.request("GET", version, headers={"Authorization": f"Bearer {long}"}).status == 200
    client.CoreV1Api(policies).delete_namespaced_service_account("reader", "ml")
    assert urllib3.request("GET", version, headers={"Authorization": f"Bearer {long}"}).status == 401
    forged = long[:-2] + ("AA" if not long.endswith("AA") else "BB")
    assert urllib3.request("GET", version, headers={"Authorization": f"Bearer {forged}"}).status == 401


def test_a_token_for_a_missing_account_or_too_short_is_refused(policies: client.ApiClient) -> None:
    core = client.CoreV1Api(policies)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_service_account_token("ghost", "ml", request)
    assert missing.value.status == 404
    short = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=60)
    )
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_service_account_token("reader", "ml", short)
    assert refused.value.status == 422
    assert json.loads(refused.value.body)["message"] == (
        'TokenRequest.authentication.k8s.io "reader" is invalid: spec.expirationSeconds: '
        "Invalid value: 60: may not specify a duration less than 10 minutes"
    )


def test_impersonating_takes_the_impersonate_verb(
    sim: world.BackgroundWorld, policies: client.ApiClient
) -> None:
    token = rbackit.service_account_token(policies, "ml", "reader")
    headers = {"Authorization": f"Bearer {token}", "Impersonate-User": ALICE}
    refused = urllib3.request("GET", f"{sim.url}/api/v1/nodes", headers=headers)
    assert refused.status == 403
    assert refused.json()["message"] == (
        'users "alice" is forbidden: User "system:serviceaccount:ml:reader" cannot impersonate '
        'resource "users" in API group "" at the cluster scope'
    )
    rbackit.create(
        policies,
        rbackit.role(
            "ClusterRole",
            "as-alice",
            [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": [ALICE]}],
        ),
    )
    rbackit.create(
        policies,
        rbackit.binding(
            "ClusterRoleBinding",
            "reader-as-alice",
            "ClusterRole",
            "as-alice",
            [{"kind": "ServiceAccount", "name": "reader", "namespace": "ml"}],
        ),
    )
    assert urllib3.request("GET", f"{sim.url}/api/v1/nodes", headers=headers).status == 200


def test_the_bot_adapter_sees_a_403_as_forbidden(
    sim: world.BackgroundWorld, policies: client.ApiClient, tmp_path: Path
) -> None:
    token = rbackit.service_account_token(policies, "ml", "reader")
    kubeconfig = rbackit.write_token_kubeconfig(sim, tmp_path / "kubeconfig", token)
    cluster = kube.KubeCluster.from_kubeconfig(str(kubeconfig), namespace="ml")
    with pytest.raises(errors.Forbidden):
        cluster.delete_pod("ml", "x")
    assert cluster.list_workloads() == []  # listing pods in ml is allowed


def test_rbac_objects_are_validated(policies: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(policies)
    with pytest.raises(ApiException) as no_verbs:
        rbac.create_namespaced_role(
            "ml",
            rbackit.role("Role", "empty", [{"apiGroups": [""], "resources": ["pods"], "verbs": []}], "ml"),
        )
    assert json.loads(no_verbs.value.body)["message"] == (
        'Role.rbac.authorization.k8s.io "empty" is invalid: rules[0].verbs: Required value: '
        "verbs must contain at least one value"
    )
    changed = rbackit.binding(
        "RoleBinding",
        "read-pods",
        "Role",
        "lease-keeper",
        [{"kind": "ServiceAccount", "name": "reader"}],
        "ml",
    )
    with pytest.raises(ApiException) as moved:
        rbac.patch_namespaced_role_binding("read-pods", "ml", {"roleRef": changed["roleRef"]})
    assert json.loads(moved.value.body)["message"] == (
        'RoleBinding.rbac.authorization.k8s.io "read-pods" is invalid: roleRef: Invalid value: '
        'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"lease-keeper"}: '
        "cannot change roleRef"
    )


# -- kubectl -----------------------------------------------------------------------------------------


@pytest.fixture
def kubectl(sim: world.BackgroundWorld, tmp_path: Path) -> Iterator[Any]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(sim.world.kubeconfig()))
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"HOME": str(tmp_path)}

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [str(KUBECTL), f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args]
        return subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=30, env=env, check=False
        )

    yield run


def test_kubectl_can_i_as_a_service_account_without_rules_says_no(kubectl: Any) -> None:
    nobody = kubectl("auth", "can-i", "delete", "nodes", "--as=system:serviceaccount:gpubot:nobody")
    assert (nobody.returncode, nobody.stdout.strip()) == (1, "no"), nobody.stderr
    admin = kubectl("auth", "can-i", "delete", "nodes")
    assert (admin.returncode, admin.stdout.strip()) == (0, "yes"), admin.stderr


def test_kubectl_as_a_service_account_is_refused_in_the_api_servers_words(kubectl: Any) -> None:
    listed = kubectl("get", "nodes", "--as=system:serviceaccount:gpubot:nobody")
    assert listed.returncode == 1
    assert listed.stderr.strip() == (
        'Error from server (Forbidden): nodes is forbidden: User "system:serviceaccount:gpubot:nobody" '
        'cannot list resource "nodes" in API group "" at the cluster scope'
    )


def test_kubectl_auth_whoami(kubectl: Any) -> None:
    admin = kubectl("auth", "whoami", "-o", "json")
    assert admin.returncode == 0, admin.stderr
    assert json.loads(admin.stdout)["status"]["userInfo"] == {
        "username": "kubernetes-admin",
        "groups": ["system:masters", "system:authenticated"],
    }
    account = kubectl("auth", "whoami", "-o", "json", "--as=system:serviceaccount:gpubot:gpubot")
    assert json.loads(account.stdout)["status"]["userInfo"] == {
        "username": "system:serviceaccount:gpubot:gpubot",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:gpubot", "system:authenticated"],
    }


ROLE_AND_BINDING = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: default}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-pods, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
- {kind: ServiceAccount, name: reader, namespace: default}
"""


def test_kubectl_applies_rbac_and_it_takes_effect(kubectl: Any) -> None:
    applied = kubectl("apply", "-f", "-", stdin=ROLE_AND_BINDING)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "serviceaccount/reader created",
        "role.rbac.authorization.k8s.io/pod-reader created",
        "rolebinding.rbac.authorization.k8s.io/read-pods created",
    ]
    reader = "--as=system:serviceaccount:default:reader"
    assert kubectl("auth", "can-i", "list", "pods", reader).stdout.strip() == "yes"
    assert kubectl("auth", "can-i", "delete", "pods", reader).stdout.strip() == "no"
    rules = kubectl("auth", "can-i", "--list", reader)
    assert any(
        line.split()[:1] == ["pods"] and "[get list watch]" in line for line in rules.stdout.splitlines()
    )
    assert kubectl("get", "pods", reader).returncode == 0
    assert kubectl("delete", "rolebinding", "read-pods").returncode == 0
    assert kubectl("auth", "can-i", "list", "pods", reader).stdout.strip() == "no"


def test_tokens_outlive_a_restart_from_saved_state(tmp_path: Path) -> None:
    config = world.WorldConfig(state_dir=tmp_path / "state")
    with (
        world.BackgroundWorld(config) as first,
        client.ApiClient(client.Configuration(host=first.url)) as admin,
    ):
        token = rbackit.service_account_token(admin, "default", "keeper")
    with world.BackgroundWorld(config) as second:
        whoami = urllib3.request(
            "POST",
            f"{second.url}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert whoami.status == 201
    assert whoami.json()["status"]["userInfo"]["username"] == "system:serviceaccount:default:keeper"
