"""policy/v1 Eviction (`POST pods/NAME/eviction`): a graceful delete that asks PodDisruptionBudgets first.

Follows EvictionREST.Create in pkg/registry/core/pod/storage/eviction.go (kubernetes v1.32.4): a pod
that is pending, finished or already being deleted is deleted at once; otherwise its one budget must
allow a disruption, which the eviction spends (disruptionsAllowed - 1, the pod in disruptedPods)
before deleting the pod with the eviction's DeleteOptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cluster import disruption, errors
from sim.cluster.store import Obj, Store, rfc3339

# Status texts from pkg/registry/core/pod/storage/eviction.go, same at v1.32.4 and v1.32.10 (the pinned
# messages.KUBERNETES_VERSION; read in openshift/microshift a8a16776fa deps/github.com/openshift/kubernetes).
TOO_MANY_REQUESTS = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
URL_NAME_MISMATCH = "name in URL does not match name in Eviction object"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"  # policy/v1 DisruptionBudgetCause
KINDS = {("Eviction", "policy/v1"), ("Eviction", "policy/v1beta1")}  # EvictionREST.AcceptsGroupVersion

Deleter = Callable[[Obj, dict[str, Any]], None]
"""Deletes the pod with these DeleteOptions, as DELETE on the pod would (preconditions, grace, dryRun)."""


def can_ignore_pdb(pod: Obj) -> bool:
    """canIgnorePDB: evicting a pod that is pending, finished or already going costs no availability."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def too_many_requests(cause: str, retry_after: int) -> errors.ApiError:
    """errors.NewTooManyRequests plus the DisruptionBudget cause createTooManyRequestsError appends."""
    details: dict[str, Any] = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    err = errors.ApiError(429, "TooManyRequests", TOO_MANY_REQUESTS, details)
    if retry_after:
        err.headers["Retry-After"] = str(retry_after)
    return err


def spend_disruption(pdb: Obj, pod_name: str, now: str) -> dict[str, Any]:
    """checkAndDecrement: the budget's status after this eviction, or the refusal."""
    name, status = pdb["metadata"]["name"], dict(pdb.get("status") or {})
    if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
        raise too_many_requests(f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed == 0:
        raise too_many_requests(
            f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
            f"and has {status.get('currentHealthy', 0)} currently",
            0,
        )
    status["disruptionsAllowed"] = allowed - 1
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}
    return status


def check_body(body: Any, namespace: str, name: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request was in an unknown format")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind and api_version and (kind, api_version) not in KINDS:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version (policy/v1)"
        )
    given = body.get("metadata")
    meta: dict[str, Any] = given if isinstance(given, dict) else {}
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if meta.get("name", "") != name:
        raise errors.bad_request(URL_NAME_MISMATCH)
    options = body.get("deleteOptions")
    return dict(options) if isinstance(options, dict) else {}


def evict(store: Store, pod: Obj, body: Any, *, delete: Deleter, dry_run: bool) -> dict[str, Any]:
    """The Status EvictionREST.Create returns; refusals are raised as ApiErrors."""
    meta = pod["metadata"]
    options = check_body(body, meta["namespace"], meta["name"])
    if can_ignore_pdb(pod):
        delete(pod, options)
        return success()
    budgets = [
        p for p in store.items("poddisruptionbudgets", meta["namespace"]) if disruption.selects(p, pod)
    ]
    if len(budgets) > 1:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": MORE_THAN_ONE,
            "code": 500,
        }
    if budgets:
        pdb = budgets[0]
        status = pdb.get("status") or {}
        unready_spare = (
            not disruption.is_pod_ready(pod)
            and status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0
        )
        if not unready_spare:
            spent = spend_disruption(pdb, meta["name"], rfc3339(store.clock))
            if not dry_run:
                store.mutate(
                    "poddisruptionbudgets",
                    meta["namespace"],
                    pdb["metadata"]["name"],
                    lambda p: p.update(status=spent),
                )
    delete(pod, options)
    return success()


def success() -> dict[str, Any]:
    """The create handler's answer to a returned Status: Success, code 201 Created."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
