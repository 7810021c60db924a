"""The chart's RBAC: exactly the rules in the table below, and enough for every API call the bot makes.

The second half is a small RBAC authorizer (bindings → roles → rules, with resourceNames) asked about each
Kubernetes client method the code under bot/ calls, so a new call without a rule fails here, not in a
cluster with a 403.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from tests.deploy import chart

CORE, COORDINATION = "", "coordination.k8s.io"
KUEUE, KUEUE_VISIBILITY = "kueue.x-k8s.io", "visibility.kueue.x-k8s.io"
READ = frozenset({"get", "list", "watch"})
Rule = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], frozenset[str]]
"""apiGroups, resources, resourceNames, verbs."""


def rule(group: str, resource: str, verbs: set[str] | frozenset[str], names: tuple[str, ...] = ()) -> Rule:
    return (group,), (resource,), names, frozenset(verbs)


def expected_rbac(
    *,
    release: str,
    namespace: str,
    workload: str,
    lease: str | None,
    pods_everywhere: bool = False,
    pod_proxy: bool = True,
    kueue: bool = False,
) -> dict[tuple[str, ...], set[Rule]]:
    """Role → rules: what gpubot needs, and nothing more (lease rules only with leader election on, the pod
    proxy only while a profile has `activity:`)."""
    leases = {
        rule(COORDINATION, "leases", {"create"}),  # RBAC cannot bind a create to a name
        rule(COORDINATION, "leases", {"get", "update"}, (lease or "",)),
    }
    return {
        ("Role", workload, release): {
            rule(CORE, "pods", {"create", "delete", "get", "list", "watch", "patch"}),
            rule(CORE, "pods/log", {"get"}),
            rule(CORE, "events", READ),
            rule(CORE, "configmaps", {"create"}),
            rule(CORE, "configmaps", READ | {"update"}, ("gpubot-warm",)),
        }
        | (leases if lease else set())
        | ({rule(CORE, "pods/proxy", {"get"})} if pod_proxy else set())
        | (
            {
                ((KUEUE,), ("workloads", "localqueues"), (), READ),
                rule(KUEUE_VISIBILITY, "localqueues/pendingworkloads", {"get"}),
            }
            if kueue
            else set()
        ),
        ("ClusterRole", "", f"{namespace}-{release}"): {rule(CORE, "nodes", READ)}
        | ({rule(CORE, "pods", {"list"})} if pods_everywhere else set())
        | ({rule(KUEUE, "clusterqueues", READ)} if kueue else set()),
        ("Role", "kube-system", f"{namespace}-{release}-autoscaler-status"): {
            rule(CORE, "configmaps", {"get"}, ("cluster-autoscaler-status",)),
        },
    }


WORKLOADS = "gpubot-workloads"
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "defaults": (
        {},
        {"release": "gpubot", "namespace": "gpubot", "workload": WORKLOADS, "lease": "gpubot-leader"},
    ),
    "own workload namespace and lease": (
        {"workloadNamespace": "gpu-jobs", "leaderElection": {"leaseName": "ml-lease"}},
        {"release": "gpubot", "namespace": "gpubot", "workload": "gpu-jobs", "lease": "ml-lease"},
    ),
    "workloads in the release namespace": (
        {"workloadNamespace": ""},
        {"release": "gpubot", "namespace": "gpubot", "workload": "gpubot", "lease": "gpubot-leader"},
    ),
    "no leader election": (
        {"replicaCount": 1, "leaderElection": {"enabled": False}},
        {"release": "gpubot", "namespace": "gpubot", "workload": WORKLOADS, "lease": None},
    ),
    "pods listed in every namespace": (
        {"rbac": {"listPodsInAllNamespaces": True}},
        {
            "release": "gpubot",
            "namespace": "gpubot",
            "workload": WORKLOADS,
            "lease": "gpubot-leader",
            "pods_everywhere": True,
        },
    ),
    "no profile reads a notebook's activity": (
        {"profiles": {"profiles": {"notebook": {"activity": None}}}},
        {
            "release": "gpubot",
            "namespace": "gpubot",
            "workload": WORKLOADS,
            "lease": "gpubot-leader",
            "pod_proxy": False,
        },
    ),
    "a profile with a Kueue queue": (
        {"profiles": {"default": "t4", "profiles": {"t4": {"queue": "team-a"}}}},
        {
            "release": "gpubot",
            "namespace": "gpubot",
            "workload": WORKLOADS,
            "lease": "gpubot-leader",
            "kueue": True,
        },
    ),
}


def granted_rules(objects: list[chart.Obj]) -> dict[tuple[str, ...], set[Rule]]:
    found: dict[tuple[str, ...], set[Rule]] = {}
    for obj in objects:
        if obj["kind"] in ("Role", "ClusterRole"):
            key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            found[key] = {
                (
                    tuple(r["apiGroups"]),
                    tuple(r["resources"]),
                    tuple(r.get("resourceNames", ())),
                    frozenset(r["verbs"]),
                )
                for r in obj["rules"]
            }
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_rbac_is_exactly_the_least_privilege_table(case: str) -> None:
    values, names = CASES[case]
    assert granted_rules(chart.render(values)) == expected_rbac(**names)


# -- every call the bot makes is allowed ------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    namespace: str
    """Empty for cluster-scoped resources and all-namespace lists."""
    group: str
    resource: str
    verb: str
    name: str = ""


def client_calls(*, workload: str, lease: str) -> dict[str, list[Request]]:
    """Each Kubernetes client method the bot calls → the API requests it makes."""
    return {
        "create_namespaced_pod": [Request(workload, CORE, "pods", "create")],
        "delete_namespaced_pod": [Request(workload, CORE, "pods", "delete")],
        "patch_namespaced_pod": [Request(workload, CORE, "pods", "patch")],
        "read_namespaced_pod": [Request(workload, CORE, "pods", "get")],
        "read_namespaced_pod_log": [Request(workload, CORE, "pods/log", "get")],
        # Only for profiles with `activity: jupyter`: the idle reaper reads a notebook's Jupyter.
        "connect_get_namespaced_pod_proxy_with_path": [Request(workload, CORE, "pods/proxy", "get")],
        # Informers list, then watch from the list's resourceVersion.
        "list_namespaced_pod": [
            Request(workload, CORE, "pods", "list"),
            Request(workload, CORE, "pods", "watch"),
        ],
        "list_namespaced_event": [
            Request(workload, CORE, "events", "list"),
            Request(workload, CORE, "events", "watch"),
        ],
        "list_node": [Request("", CORE, "nodes", "list"), Request("", CORE, "nodes", "watch")],
        # Optional (rbac.listPodsInAllNamespaces): on 403 the adapter lists in the workload namespace.
        "list_pod_for_all_namespaces": [Request("", CORE, "pods", "list")],
        "read_namespaced_config_map": [
            Request("kube-system", CORE, "configmaps", "get", "cluster-autoscaler-status"),
            Request(workload, CORE, "configmaps", "get", "gpubot-warm"),
        ],
        # The warm schedules' ConfigMap: one informer over it by name, and `/gpu warm`'s writes.
        "list_namespaced_config_map": [
            Request(workload, CORE, "configmaps", "list", "gpubot-warm"),
            Request(workload, CORE, "configmaps", "watch", "gpubot-warm"),
        ],
        "create_namespaced_config_map": [Request(workload, CORE, "configmaps", "create")],
        "replace_namespaced_config_map": [Request(workload, CORE, "configmaps", "update", "gpubot-warm")],
        "read_namespaced_lease": [Request(workload, COORDINATION, "leases", "get", lease)],
        "create_namespaced_lease": [Request(workload, COORDINATION, "leases", "create")],
        "replace_namespaced_lease": [Request(workload, COORDINATION, "leases", "update", lease)],
        # With a profile's Kueue `queue:`: informers over Workloads and LocalQueues, and ClusterQueues.
        "list_namespaced_custom_object": [
            Request(workload, KUEUE, resource, verb)
            for resource in ("workloads", "localqueues")
            for verb in ("list", "watch")
        ],
        "list_cluster_custom_object": [
            Request("", KUEUE, "clusterqueues", "list"),
            Request("", KUEUE, "clusterqueues", "watch"),
        ],
        "get_namespaced_custom_object": [Request(workload, KUEUE, "localqueues", "get")],
        "get_cluster_custom_object": [Request("", KUEUE, "clusterqueues", "get")],
        # `gpubot doctor` asks the API server what the bot may do.
        "create_self_subject_access_review": [
            Request("", "authorization.k8s.io", "selfsubjectaccessreviews", "create")
        ],
    }


API_VERBS = re.compile(r"\.((?:create|read|list|patch|replace|delete|watch|connect)_[a-z0-9_]+)\b")


def methods_the_bot_calls() -> set[str]:
    """Kubernetes API client methods referenced (called, or handed to an informer) in the modules of bot/
    that import the client: the only ones that may talk to the API server."""
    api_classes = [
        getattr(client, name) for name in dir(client) if name.endswith("Api") and name != "ApiClient"
    ]
    texts = [p.read_text(encoding="utf-8") for p in sorted((chart.ROOT / "bot").rglob("*.py"))]
    source = "\n".join(
        text for text in texts if re.search(r"^(from|import) kubernetes\b", text, re.MULTILINE)
    )
    return {name for name in API_VERBS.findall(source) if any(hasattr(api, name) for api in api_classes)}


def rule_allows(granted: dict[str, Any], request: Request) -> bool:
    return (
        request.group in granted["apiGroups"]
        and request.resource in granted["resources"]
        and request.verb in granted["verbs"]
        and (not granted.get("resourceNames") or request.name in granted["resourceNames"])
    )


BASIC_USER_RULES = [
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        "verbs": ["create"],
    }
]
"""The built-in `system:basic-user` ClusterRole, bound to every authenticated user: no chart rule needed."""


def is_allowed(objects: list[chart.Obj], account: tuple[str, str], request: Request) -> bool:
    """What the RBAC authorizer answers for the ServiceAccount (namespace, name)."""
    if any(rule_allows(r, request) for r in BASIC_USER_RULES):
        return True
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["rules"]
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    subject = {"kind": "ServiceAccount", "namespace": account[0], "name": account[1]}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding") or subject not in binding["subjects"]:
            continue
        ref, where = binding["roleRef"], binding["metadata"].get("namespace", "")
        if binding["kind"] == "RoleBinding" and request.namespace != where:
            continue  # a RoleBinding grants only in its own namespace, never cluster-wide
        role_namespace = where if ref["kind"] == "Role" else ""
        if any(rule_allows(r, request) for r in roles.get((ref["kind"], role_namespace, ref["name"]), [])):
            return True
    return False


def test_the_scan_finds_the_calls_the_bot_makes() -> None:
    assert {"create_namespaced_pod", "list_node", "replace_namespaced_lease"} <= methods_the_bot_calls()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_kubernetes_call_the_bot_makes_is_allowed(case: str) -> None:
    values, names = CASES[case]
    objects = chart.render(values)
    calls = client_calls(workload=names["workload"], lease=names["lease"] or "")
    unknown = methods_the_bot_calls() - set(calls)
    assert not unknown, f"bot/ calls {sorted(unknown)}: add them to client_calls and a rule to the chart"
    account = (names["namespace"], names["release"])
    for method in sorted(methods_the_bot_calls()):
        if "lease" in method and names["lease"] is None:
            continue  # without leader election the bot never touches the Lease
        if "custom_object" in method and not names.get("kueue"):
            continue  # without a profile's Kueue queue the bot never reads Kueue's objects
        if method == "list_pod_for_all_namespaces":
            allowed = all(is_allowed(objects, account, r) for r in calls[method])
            assert allowed == names.get("pods_everywhere", False), "pods in every namespace: only when asked"
            continue
        if method == "connect_get_namespaced_pod_proxy_with_path":
            allowed = all(is_allowed(objects, account, r) for r in calls[method])
            assert allowed == names.get("pod_proxy", True), "the pod proxy: only for a profile's activity"
            continue
        for request in calls[method]:
            assert is_allowed(objects, account, request), f"{method}: RBAC forbids {request}"


def test_the_authorizer_refuses_what_the_chart_does_not_grant() -> None:
    objects, account = chart.render(), ("gpubot", "gpubot")
    assert is_allowed(objects, account, Request(WORKLOADS, CORE, "pods", "delete"))
    assert not is_allowed(objects, account, Request("gpubot", CORE, "pods", "delete"))
    assert not is_allowed(objects, account, Request("other", CORE, "pods", "delete"))
    assert not is_allowed(objects, account, Request("", CORE, "pods", "list"))
    assert not is_allowed(objects, account, Request("gpubot", CORE, "secrets", "get", "gpubot-slack"))
    assert not is_allowed(objects, account, Request("kube-system", CORE, "configmaps", "get", "kube-proxy"))
    assert not is_allowed(objects, account, Request(WORKLOADS, CORE, "configmaps", "update", "other-config"))
    assert not is_allowed(
        objects, account, Request(WORKLOADS, COORDINATION, "leases", "delete", "gpubot-leader")
    )
    assert not is_allowed(
        objects, account, Request(WORKLOADS, COORDINATION, "leases", "update", "other-lease")
    )
    assert not is_allowed(objects, account, Request(WORKLOADS, COORDINATION, "leases", "get", "other-lease"))
    assert is_allowed(objects, account, Request(WORKLOADS, COORDINATION, "leases", "update", "gpubot-leader"))
    assert not is_allowed(objects, account, Request("", CORE, "nodes", "patch"))
    assert not is_allowed(objects, account, Request("", CORE, "events", "list"))
    assert not is_allowed(objects, ("gpubot", "intruder"), Request(WORKLOADS, CORE, "pods", "get"))
