"""Who is asking: the admin token, ServiceAccount tokens the sim issues, and `kubectl auth whoami`.

The kubeconfig `gpubot sim` writes carries the admin token (`sim`), which is `kubernetes-admin` in
`system:masters`: RBAC never limits it, as on a real cluster's admin credentials. A request without
credentials is that admin too (a deliberate difference: a real API server would make it
`system:anonymous`), so scripts and tests that set no token keep working. A ServiceAccount token comes
from TokenRequest (`kubectl create token NAME -n NS`, or the client's
`create_namespaced_service_account_token`): a JWT signed by this sim, valid until it expires on the sim's
clock and while its ServiceAccount (same uid) exists; it authenticates as
`system:serviceaccount:NS:NAME` in `system:serviceaccounts`, `system:serviceaccounts:NS` and
`system:authenticated`. Anything else is 401 Unauthorized.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from sim.clock import Clock
from sim.cluster import errors, protobuf, rbac
from sim.cluster.store import Store

ADMIN_TOKEN = "sim"
ADMIN = rbac.ADMIN
AUTHENTICATED = rbac.AUTHENTICATED
ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION = 3600
"""Seconds; TokenRequest's default expirationSeconds."""
MIN_EXPIRATION = 600
USER_KEY = web.RequestKey("gpubot-sim-user", rbac.User)
"""Where the API server's filters leave the request's (possibly impersonated) user for its handlers."""
TOKEN_PATH = "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def unauthorized() -> errors.ApiError:
    return errors.ApiError(401, "Unauthorized", "Unauthorized")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authenticator:
    def __init__(self, store: Store, clock: Clock, key: bytes | None = None) -> None:
        self.store = store
        self.clock = clock
        self.key = key or secrets.token_bytes(32)
        """The signing key; saved with the sim's state so tokens outlive a restart, as a cluster's do."""

    def routes(self) -> list[web.RouteDef]:
        """Registered before the API server's catch-all routes, which would 404 them."""
        return [web.post(TOKEN_PATH, self.request_token), web.post(REVIEW_PATH, self.review_self)]

    # -- tokens ---------------------------------------------------------------------------------
    def issue(self, namespace: str, name: str, uid: str, seconds: int) -> tuple[str, float]:
        now = self.clock.datetime().timestamp()
        claims = {
            "aud": [ISSUER],
            "iss": ISSUER,
            "iat": int(now),
            "nbf": int(now),
            "exp": int(now + seconds),
            "sub": rbac.service_account_user(namespace, name),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        }
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self.key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}", now + seconds

    def verify(self, token: str) -> rbac.User | None:
        try:
            header, payload, signature = token.split(".")
            expected = hmac.new(self.key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(signature)):
                return None
            claims = json.loads(_unb64(payload))
            account = claims["kubernetes.io"]
            namespace, name, uid = (
                account["namespace"],
                account["serviceaccount"]["name"],
                account["serviceaccount"]["uid"],
            )
        except (ValueError, KeyError, TypeError):
            return None
        if claims.get("exp", 0) <= self.clock.datetime().timestamp():
            return None
        current = self.store.get("serviceaccounts", namespace, name)
        if current is None or current["metadata"].get("uid") != uid:
            return None  # the account was deleted (or made anew): its tokens die with it
        groups = (*rbac.service_account_groups(namespace), AUTHENTICATED)
        return rbac.User(rbac.service_account_user(namespace, name), groups, uid)

    def authenticate(self, headers: Mapping[str, str]) -> rbac.User:
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if not scheme:
            return ADMIN
        if scheme.lower() != "bearer":
            raise unauthorized()
        token = token.strip()
        if token == ADMIN_TOKEN:
            return ADMIN
        user = self.verify(token)
        if user is None:
            raise unauthorized()
        return user

    # -- handlers -------------------------------------------------------------------------------
    async def request_token(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            seconds, audiences = token_spec(request.content_type, await request.read())
            account = self.store.get("serviceaccounts", namespace, name)
            if account is None:
                raise errors.not_found(errors.ResourceRef("", "serviceaccounts", "ServiceAccount", name))
            if seconds < MIN_EXPIRATION:
                detail = "may not specify a duration less than 10 minutes"
                cause = errors.invalid_value("spec.expirationSeconds", seconds, detail)
                raise errors.invalid("TokenRequest", name, [cause], "authentication.k8s.io", qualify=True)
        except errors.ApiError as err:
            return web.json_response(err.status(), status=err.code)
        token, expires = self.issue(namespace, name, account["metadata"]["uid"], seconds)
        body = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": {
                "audiences": audiences or [ISSUER],
                "expirationSeconds": seconds,
                "boundObjectRef": None,
            },
            "status": {"token": token, "expirationTimestamp": _stamp(self.clock, expires)},
        }
        return web.json_response(body, status=201)

    async def review_self(self, request: web.Request) -> web.Response:
        """SelfSubjectReview: the body asks nothing (kubectl sends it as protobuf), so it is not read."""
        user = request.get(USER_KEY, ADMIN)
        info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        body = {
            "kind": "SelfSubjectReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "status": {"userInfo": info},
        }
        return web.json_response(body, status=201)


def token_spec(content_type: str, raw: bytes) -> tuple[int, list[str]]:
    """expirationSeconds and audiences of a TokenRequest, sent as JSON or (by kubectl) protobuf."""
    if not raw:
        return DEFAULT_EXPIRATION, []
    if content_type == protobuf.CONTENT_TYPE:
        try:
            found = protobuf.spec_fields(raw)  # TokenRequestSpec{audiences=1, expirationSeconds=4}
        except (ValueError, IndexError):
            raise errors.bad_request("the request body is not a TokenRequest") from None
        seconds, audience = found.get(4, DEFAULT_EXPIRATION), found.get(1)
        return int(seconds) if isinstance(seconds, int) else DEFAULT_EXPIRATION, (
            [audience.decode()] if isinstance(audience, bytes) else []
        )
    try:
        asked: dict[str, Any] = json.loads(raw).get("spec") or {}
        seconds = int(asked.get("expirationSeconds") or DEFAULT_EXPIRATION)
    except (ValueError, AttributeError, TypeError):
        raise errors.bad_request("the request body is not a TokenRequest") from None
    return seconds, [str(a) for a in asked.get("audiences") or []]


def _stamp(clock: Clock, timestamp: float) -> str:
    return clock.to_datetime(timestamp - clock.epoch.timestamp()).strftime("%Y-%m-%dT%H:%M:%SZ")
