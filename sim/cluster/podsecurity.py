"""Pod Security admission: the built-in PodSecurity plugin for namespaces that carry its labels.

Worded and ordered as upstream answers, from kubernetes/pod-security-admission at tag v0.32.0 (commit
eb0316b, the staging copy of kubernetes/kubernetes staging/src/k8s.io/pod-security-admission at v1.32.0):
`admission/admission.go` EvaluatePod (`violates PodSecurity %q: %s`), `admission/response.go`
forbiddenResponse (apierrors.NewForbidden on the pods GroupResource), `policy/checks.go`
AggregateCheckResult.ForbiddenDetail (`reason (detail), reason`), `policy/registry.go` (baseline checks
first, then restricted, each sorted by check ID), `api/helpers.go` PolicyToEvaluate and ParseLevel, and one
`policy/check_*.go` per check below.

Simulated: the enforce level and version labels on create of a pod (an update cannot change the fields
these checks read), namespace labels refused when their level is not one of the three. Checks simulated:
baseline hostNamespaces and privileged; restricted allowPrivilegeEscalation, capabilities_restricted,
runAsNonRoot, runAsUser, seccompProfile_restricted. Not simulated: the other baseline checks (AppArmor,
hostPath and host ports, procMount, SELinux, sysctls, baseline capabilities and seccomp), restrictedVolumes
(the sim has no volumes), the audit and warn modes, versions other than the newest (`enforce-version` only
changes the wording), exemptions, and the warnings a namespace update gets for pods already in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sim.cluster import errors

Obj = dict[str, Any]

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")
SECCOMP_FIELD = "securityContext.seccompProfile.type"
LEVEL_PROBLEM = "must be one of privileged, baseline, restricted"
"""api/helpers.go ParseLevel."""


@dataclass(frozen=True)
class Violation:
    reason: str
    detail: str = ""


Check = Callable[[Obj], Violation | None]


def enforced(namespace: Obj | None) -> tuple[str, str]:
    """(level, version) enforced in the namespace; an unlabelled one is privileged (the default config),
    an unknown level is restricted (ParseLevel fails closed for enforce)."""
    found = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    level = str(found.get(ENFORCE_LABEL, "privileged"))
    return (level if level in LEVELS else "restricted"), str(found.get(ENFORCE_VERSION_LABEL, "latest"))


def label_causes(namespace: Obj) -> list[errors.Cause]:
    """A namespace's Pod Security labels with a level that is not one of the three."""
    found = (namespace.get("metadata") or {}).get("labels") or {}
    causes = []
    for mode in ("enforce", "audit", "warn"):
        key = f"pod-security.kubernetes.io/{mode}"
        if key in found and found[key] not in LEVELS:
            causes.append(errors.invalid_value(f"metadata.labels[{key}]", found[key], LEVEL_PROBLEM))
    return causes


def namespace_causes(namespace: Obj, old: Obj | None) -> list[errors.Cause]:
    """ValidateNamespace: bad level labels are refused, unless an update leaves them as they were."""
    causes = label_causes(namespace)
    if old is not None and causes == label_causes(old):
        return []
    return causes


def admit_pod(pod: Obj, namespace: Obj | None) -> None:
    """Raise 403 Forbidden as the apiserver does when the namespace's enforced level refuses the pod."""
    level, version = enforced(namespace)
    if level == "privileged":
        return
    checks = BASELINE + (RESTRICTED if level == "restricted" else ())
    spec = pod.get("spec") or {}
    found = [v for check in checks if (v := check(spec)) is not None]
    if not found:
        return
    detail = ", ".join(f"{v.reason} ({v.detail})" if v.detail else v.reason for v in found)
    name = (pod.get("metadata") or {}).get("name", "")
    raise errors.ApiError(
        403,
        "Forbidden",
        f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": {detail}',
        {"name": name, "kind": "pods"},
    )


# -- the checks, each worded as its policy/check_*.go ----------------------------------------------------


def _containers(spec: Obj) -> Iterator[Obj]:
    """visitContainers: init containers, containers, then ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from (c for c in spec.get(key) or [] if isinstance(c, dict))


def _context(container: Obj) -> Obj:
    return container.get("securityContext") or {}


def _names(containers: Iterable[Obj]) -> list[str]:
    return [str(c.get("name", "")) for c in containers]


def _named(names: list[str]) -> str:
    """`container "a"` or `containers "a", "b"`: pluralize and joinQuote."""
    return ("container " if len(names) == 1 else "containers ") + ", ".join(f'"{n}"' for n in names)


def _is_windows(spec: Obj) -> bool:
    """The 1.25+ versions of the Linux-only checks pass pods that declare `os.name: windows`."""
    return (spec.get("os") or {}).get("name") == "windows"


def check_host_namespaces(spec: Obj) -> Violation | None:
    used = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    return Violation("host namespaces", ", ".join(used)) if used else None


def check_privileged(spec: Obj) -> Violation | None:
    bad = _names(c for c in _containers(spec) if _context(c).get("privileged") is True)
    detail = f"{_named(bad)} must not set securityContext.privileged=true"
    return Violation("privileged", detail) if bad else None


def check_allow_privilege_escalation(spec: Obj) -> Violation | None:
    if _is_windows(spec):
        return None
    bad = _names(c for c in _containers(spec) if _context(c).get("allowPrivilegeEscalation") is not False)
    detail = f"{_named(bad)} must set securityContext.allowPrivilegeEscalation=false"
    return Violation("allowPrivilegeEscalation != false", detail) if bad else None


def check_capabilities(spec: Obj) -> Violation | None:
    if _is_windows(spec):
        return None
    missing_drop, adding, forbidden = [], [], set()
    for container in _containers(spec):
        capabilities = _context(container).get("capabilities")
        name = str(container.get("name", ""))
        if capabilities is None:
            missing_drop.append(name)
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing_drop.append(name)
        added = {str(c) for c in capabilities.get("add") or [] if c != "NET_BIND_SERVICE"}
        if added:
            adding.append(name)
            forbidden |= added
    details = []
    if missing_drop:
        details.append(f'{_named(missing_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        listed = ", ".join(f'"{c}"' for c in sorted(forbidden))
        details.append(f"{_named(adding)} must not include {listed} in securityContext.capabilities.add")
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


def _pod_and_containers(spec: Obj, field: str, bad: Callable[[Any], bool]) -> tuple[list[str], list[str]]:
    """(explicit bad setters: "pod" and/or `containers "a"`, containers that rely on an unset pod value)."""
    setters, unset = [], []
    pod_value = (spec.get("securityContext") or {}).get(field)
    pod_good = pod_value is not None and not bad(pod_value)
    if pod_value is not None and bad(pod_value):
        setters.append("pod")
    explicit = []
    for container in _containers(spec):
        value = _context(container).get(field)
        if value is not None and bad(value):
            explicit.append(str(container.get("name", "")))
        elif value is None and not pod_good:
            unset.append(str(container.get("name", "")))
    if explicit:
        setters.append(_named(explicit))
    return setters, unset


def check_run_as_non_root(spec: Obj) -> Violation | None:
    setters, unset = _pod_and_containers(spec, "runAsNonRoot", lambda v: v is not True)
    reason = "runAsNonRoot != true"
    if setters:
        return Violation(reason, f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")
    if unset:
        return Violation(reason, f"pod or {_named(unset)} must set securityContext.runAsNonRoot=true")
    return None


def check_run_as_user(spec: Obj) -> Violation | None:
    setters, _ = _pod_and_containers(spec, "runAsUser", lambda v: v == 0)
    return Violation("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def check_seccomp(spec: Obj) -> Violation | None:
    if _is_windows(spec):
        return None

    def bad(profile: Any) -> bool:
        return (profile or {}).get("type") not in ("RuntimeDefault", "Localhost")

    setters, unset = _pod_and_containers(spec, "seccompProfile", bad)
    if setters:
        values = {str(p.get("type", "")) for p in _seccomp_profiles(spec) if bad(p)}
        listed = ", ".join(f'"{v}"' for v in sorted(values))
        who = " and ".join(setters)
        return Violation("seccompProfile", f"{who} must not set {SECCOMP_FIELD} to {listed}")
    if unset:
        wanted = '"RuntimeDefault" or "Localhost"'
        return Violation("seccompProfile", f"pod or {_named(unset)} must set {SECCOMP_FIELD} to {wanted}")
    return None


def _seccomp_profiles(spec: Obj) -> Iterator[Obj]:
    if (spec.get("securityContext") or {}).get("seccompProfile") is not None:
        yield spec["securityContext"]["seccompProfile"]
    for container in _containers(spec):
        if _context(container).get("seccompProfile") is not None:
            yield _context(container)["seccompProfile"]


BASELINE: tuple[Check, ...] = (check_host_namespaces, check_privileged)
"""By check ID: hostNamespaces, privileged."""
RESTRICTED: tuple[Check, ...] = (
    check_allow_privilege_escalation,
    check_capabilities,
    check_run_as_non_root,
    check_run_as_user,
    check_seccomp,
)
"""By check ID: allowPrivilegeEscalation, capabilities_restricted, runAsNonRoot, runAsUser,
seccompProfile_restricted (which replace the baseline capabilities and seccomp checks)."""
