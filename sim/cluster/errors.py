"""Kubernetes `Status` failures, shaped exactly as apimachinery's `pkg/api/errors` builds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One field error: `reason` is FieldValueInvalid, FieldValueRequired, FieldValueNotSupported..."""

    reason: str
    field: str
    message: str


class ApiError(Exception):
    """An error the API server answers with a metav1 Status body."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers: dict[str, str] = {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


PAGE_NOT_FOUND = "404 page not found\n"
"""net/http NotFound, what the apiserver's NotFoundHandler (staging/src/k8s.io/apiserver/pkg/util/
notfoundhandler/not_found_handler.go, k8s v1.32.10) answers for a path nothing serves, in text/plain;
client-go then reports `the server could not find the requested resource`."""


class PathNotFound(ApiError):
    """No resource or subresource at this path: answered as plain text, not as a Status."""

    def __init__(self) -> None:
        super().__init__(404, "NotFound", "the server could not find the requested resource")


@dataclass
class ResourceRef:
    group: str
    plural: str
    kind: str
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def qualified(self) -> str:
        """`pods` or `leases.coordination.k8s.io`, as apimachinery prints a GroupResource."""
        return self.plural if not self.group else f"{self.plural}.{self.group}"

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.plural}
        if self.group:
            out["group"] = self.group
        return out


def not_found(ref: ResourceRef) -> ApiError:
    return ApiError(404, "NotFound", f'{ref.qualified()} "{ref.name}" not found', ref.details())


def already_exists(ref: ResourceRef) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{ref.qualified()} "{ref.name}" already exists', ref.details())


def conflict(ref: ResourceRef) -> ApiError:
    msg = (
        f'Operation cannot be fulfilled on {ref.qualified()} "{ref.name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", msg, ref.details())


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


PATCH_MEDIA_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
)


def unsupported_media(accepted: tuple[str, ...] = PATCH_MEDIA_TYPES) -> ApiError:
    """negotiation.errUnsupportedMediaType (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/negotiation/
    errors.go, v1.32.4): the accepted types only, never the one sent."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


INTERNAL_ERROR_DETAIL = "the simulated API server failed on this request; its log has the details"


def internal_error() -> ApiError:
    """errors.NewInternalError: 500 InternalError, its cause also under details.causes."""
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {INTERNAL_ERROR_DETAIL}",
        {"causes": [{"message": INTERNAL_ERROR_DETAIL}]},
    )


def invalid(kind: str, name: str, causes: list[Cause], group: str = "", *, qualify: bool = False) -> ApiError:
    """422 Invalid: `Pod "x" is invalid: <field>: <msg>` or `[a, b]` for several causes; `qualify` names
    the kind with its group (`Role.rbac.authorization.k8s.io "x"`), as NewInvalid prints a GroupKind."""
    rendered = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    aggregate = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    shown = f"{kind}.{group}" if qualify and group else kind
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes],
    }
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{shown} "{name}" is invalid: {aggregate}', details)


def required(path: str) -> Cause:
    return Cause("FieldValueRequired", path, "Required value")


def invalid_value(path: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueInvalid", path, f"Invalid value: {go_repr(value)}: {detail}")


def not_supported(path: str, value: Any, allowed: list[str]) -> Cause:
    quoted = ", ".join(f'"{a}"' for a in allowed)
    return Cause(
        "FieldValueNotSupported", path, f"Unsupported value: {go_repr(value)}: supported values: {quoted}"
    )


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", path, f"Forbidden: {detail}")


def go_repr(value: Any) -> str:
    """Values print as Go's %#v would in field errors: strings quoted, numbers bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
