"""The API server's filters before every Kubernetes path: authenticate, impersonate, authorize.

The order is the real one (staging/src/k8s.io/apiserver/pkg/server/config.go, DefaultBuildHandlerChain):
so a forbidden request is refused before routing, and a 403 comes even for a resource the sim does not
serve. The sim's own control API (`/simctl`), the cloud APIs and the metrics endpoint are not Kubernetes
paths and pass untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from sim.cluster import authentication, errors, rbac, requestinfo
from sim.cluster.store import Store

KUBE_PREFIXES = ("/api", "/version", "/healthz", "/livez", "/readyz", "/openapi")
IMPERSONATE_USER, IMPERSONATE_GROUP, IMPERSONATE_UID = (
    "Impersonate-User",
    "Impersonate-Group",
    "Impersonate-Uid",
)
AUTHENTICATION_GROUP = "authentication.k8s.io"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_kube_path(path: str) -> bool:
    return path.startswith(KUBE_PREFIXES)


def forbidden(attributes: rbac.Attributes, reason: str) -> errors.ApiError:
    """responsewriters.Forbidden and apierrors.NewForbidden, as in kubernetes/kubernetes v1.32.4
    (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go, `forbiddenMessage`;
    staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go, `NewForbidden`)."""
    user = attributes.user.name
    if not attributes.resource_request:
        message = f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    else:
        resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
        scope = (
            f'in the namespace "{attributes.namespace}"' if attributes.namespace else "at the cluster scope"
        )
        message = (
            f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.group}" {scope}'
        )
    message = sanitize(message) + (f": {reason}" if reason else "")
    details: dict[str, str] = {}
    if attributes.name:
        details["name"] = attributes.name
    if attributes.group:
        details["group"] = attributes.group
    if attributes.resource:
        details["kind"] = attributes.resource
    if not attributes.resource:  # an empty GroupResource: non-resource paths
        return errors.ApiError(403, "Forbidden", f"forbidden: {message}", details)
    qualified = attributes.resource + (f".{attributes.group}" if attributes.group else "")
    named = f' "{attributes.name}"' if attributes.name else ""
    return errors.ApiError(403, "Forbidden", f"{qualified}{named} is forbidden: {message}", details)


def sanitize(message: str) -> str:
    """errors.go's sanitizer: nothing in a 403 may look like HTML."""
    return message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Filters:
    def __init__(self, store: Store, authenticator: authentication.Authenticator) -> None:
        self.store = store
        self.authenticator = authenticator

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not is_kube_path(request.path):
            return await handler(request)
        try:
            user = self.authenticator.authenticate(request.headers)
            user = self.impersonate(user, request)
            asked = requestinfo.attributes(user, request.method, request.path, request.query)
            decision = rbac.authorize(self.store, asked)
            if not decision.allowed:
                raise forbidden(asked, decision.reason)
        except errors.ApiError as err:
            return web.json_response(err.status(), status=err.code)
        request[authentication.USER_KEY] = user
        return await handler(request)

    def impersonate(self, user: rbac.User, request: web.Request) -> rbac.User:
        """filters/impersonation.go: the requester must be allowed to `impersonate` each asked identity."""
        name = request.headers.get(IMPERSONATE_USER, "")
        groups = tuple(request.headers.getall(IMPERSONATE_GROUP, []))
        uid = request.headers.get(IMPERSONATE_UID, "")
        if not name:
            if groups or uid:
                raise errors.bad_request(
                    "requested impersonation of groups or a uid without impersonating a user"
                )
            return user
        for asked in impersonated_attributes(user, name, groups, uid):
            decision = rbac.authorize(self.store, asked)
            if not decision.allowed:
                raise forbidden(asked, decision.reason)
        if name.startswith(rbac.SERVICE_ACCOUNT_PREFIX) and not groups:
            namespace = name.removeprefix(rbac.SERVICE_ACCOUNT_PREFIX).split(":", 1)[0]
            groups = rbac.service_account_groups(namespace)
        if name != "system:anonymous" and authentication.AUTHENTICATED not in groups:
            groups = (*groups, authentication.AUTHENTICATED)
        return rbac.User(name, groups, uid)


def impersonated_attributes(
    user: rbac.User, name: str, groups: tuple[str, ...], uid: str
) -> list[rbac.Attributes]:
    """One `impersonate` check per asked identity: a ServiceAccount by its namespace and name, others as
    users, groups and uids."""
    if name.startswith(rbac.SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
        namespace, account = name.removeprefix(rbac.SERVICE_ACCOUNT_PREFIX).split(":")
        checks = [
            rbac.Attributes(
                user, "impersonate", namespace=namespace, resource="serviceaccounts", name=account
            )
        ]
    else:
        checks = [rbac.Attributes(user, "impersonate", resource="users", name=name)]
    checks += [rbac.Attributes(user, "impersonate", resource="groups", name=g) for g in groups]
    if uid:
        checks.append(
            rbac.Attributes(user, "impersonate", group=AUTHENTICATION_GROUP, resource="uids", name=uid)
        )
    return checks
