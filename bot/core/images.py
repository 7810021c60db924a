"""The container image reference grammar (distribution/reference, as Docker and containerd parse it).

A bad reference is refused before anything is created, with a message that says what to fix: far kinder
than a pod stuck in InvalidImageName or ErrImagePull minutes after a node was bought for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core import models

NAME_TOTAL_LENGTH_MAX = 255
DEFAULT_DOMAIN = "docker.io"
EXAMPLE_IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
DOMAIN = re.compile(rf"{_HOST}(?::[0-9]+)?")
# Upstream writes the separator as `[_.]|__|[-]*`; `-+` is the same language without the empty
# alternative, which would make Python's backtracking engine exponential on near-misses.
PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
DIGEST = re.compile(r"([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*):([0-9a-fA-F]{32,})")
KNOWN_DIGEST_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
SHELL_METACHARACTERS = frozenset(";|&$`<>(){}!*?'\"\\#~")
SHOWN_MAX = 100
"""Characters of a user's text a refusal quotes."""


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference; `domain` is empty when the user relied on Docker Hub."""

    domain: str
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def name(self) -> str:
        return f"{self.domain}/{self.path}" if self.domain else self.path

    @property
    def familiar(self) -> str:
        """The reference as a user would write it, e.g. `nvidia/cuda:12.4.1-base-ubuntu22.04`."""
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"

    @property
    def canonical(self) -> str:
        """Fully qualified, as a container runtime pulls it: `docker.io/library/ubuntu:latest`."""
        domain = self.domain or DEFAULT_DOMAIN
        path = f"library/{self.path}" if not self.domain and "/" not in self.path else self.path
        tag = self.tag or ("" if self.digest else "latest")
        return f"{domain}/{path}{':' + tag if tag else ''}{'@' + self.digest if self.digest else ''}"


def _shown(text: str) -> str:
    """The user's text quoted in a refusal, clipped: a repr can be ten times longer than what was typed."""
    quoted = repr(text)
    return quoted if len(quoted) <= SHOWN_MAX else quoted[: SHOWN_MAX - 1] + "…"


def _refuse(problem: str, fixed: str | None = None) -> models.UsageError:
    return models.UsageError(problem, f"/gpu run {fixed or EXAMPLE_IMAGE}")


def _check_characters(text: str) -> models.UsageError | None:
    if not text:
        return _refuse("`/gpu run` needs an image to run.")
    if any(char.isspace() for char in text):
        return _refuse(f"An image reference cannot contain spaces: {_shown(text)}.")
    if "://" in text:
        return _refuse("An image reference has no `https://` part.", text.split("://", 1)[1])
    bad = sorted({char for char in text if char in SHELL_METACHARACTERS or not char.isprintable()})
    if bad:
        shown = " ".join(f"`{char}`" for char in bad[:8]) + (" …" if len(bad) > 8 else "")
        return _refuse(
            f"{shown} cannot appear in an image reference ({_shown(text)}). Commands go after `--`."
        )
    return None


def _split_domain(name: str) -> tuple[str, str]:
    """Docker's rule: the first component is a registry host if it has a `.` or `:`, or is `localhost`.

    Like upstream's anchored regex, a dotted first component that is no valid host but is a valid path
    component (`0.0_0/x`) stays part of the path.
    """
    first, slash, rest = name.partition("/")
    looks_like_host = "." in first or ":" in first or first == "localhost"
    if (
        slash
        and looks_like_host
        and (":" in first or DOMAIN.fullmatch(first) or not PATH_COMPONENT.fullmatch(first))
    ):
        return first, rest
    return "", name


def _is_valid_path(path: str) -> bool:
    return all(PATH_COMPONENT.fullmatch(component) for component in path.split("/"))


def _check_path(path: str, text: str) -> models.UsageError | None:
    if path != path.lower() and _is_valid_path(path.lower()):
        return _refuse(
            f"Repository names must be lowercase: {_shown(text)}.", text.replace(path, path.lower())
        )
    for component in path.split("/"):
        if not PATH_COMPONENT.fullmatch(component):
            return _refuse(
                f"{_shown(component)} is not a valid part of an image name ({_shown(text)}): use lowercase "
                "letters and digits, separated by `.`, `_`, `__` or `-`."
            )
    return None


def _check_tag(tag: str, text: str) -> models.UsageError | None:
    if TAG.fullmatch(tag):
        return None
    return _refuse(
        f"{_shown(tag)} is not a valid tag ({_shown(text)}): up to 128 letters, digits, `_`, `.` and "
        "`-`, not starting with `.` or `-`."
    )


def _check_digest(digest: str, text: str) -> models.UsageError | None:
    match = DIGEST.fullmatch(digest)
    if not match:
        return _refuse(
            f"{_shown(digest)} is not a valid digest ({_shown(text)}): write `sha256:` and 64 hex digits."
        )
    algorithm, hex_digits = match.groups()
    expected = KNOWN_DIGEST_LENGTHS.get(algorithm)
    if expected is None:
        return _refuse(f"Unsupported digest algorithm {algorithm!r} ({_shown(text)}): use sha256.")
    if len(hex_digits) != expected or hex_digits != hex_digits.lower():
        return _refuse(f"A {algorithm} digest is {expected} lowercase hex digits ({_shown(text)}).")
    return None


def _split_reference(text: str) -> tuple[str, str, str]:
    """name[:tag][@digest]; a `:` before the last `/` belongs to a registry port, not a tag."""
    rest, _, digest = text.partition("@")
    name, tag = rest, ""
    colon = rest.rfind(":")
    if colon > rest.rfind("/"):
        name, tag = rest[:colon], rest[colon + 1 :]
    return name, tag, digest


def _check_parts(text: str) -> models.UsageError | None:
    name, tag, digest = _split_reference(text)
    if not name:
        return _refuse(f"{_shown(text)} has no image name before the tag or digest.")
    if len(name) > NAME_TOTAL_LENGTH_MAX:
        return _refuse(
            f"An image name may be at most {NAME_TOTAL_LENGTH_MAX} characters; this one is {len(name)}."
        )
    domain, path = _split_domain(name)
    if domain and not DOMAIN.fullmatch(domain):
        return _refuse(f"{_shown(domain)} is not a valid registry host ({_shown(text)}).")
    if ("@" in text and not digest) or (tag == "" and text.partition("@")[0].endswith(":")):
        return _refuse(f"{_shown(text)} ends its tag or digest part empty.", name)
    return (
        _check_path(path, text)
        or (_check_tag(tag, text) if tag else None)
        or (_check_digest(digest, text) if digest else None)
    )


def parse_image(text: str) -> ImageRef | models.UsageError:
    """Parse an image reference, or explain what is wrong with it and what to type instead."""
    problem = _check_characters(text) or _check_parts(text)
    if problem:
        return problem
    name, tag, digest = _split_reference(text)
    domain, path = _split_domain(name)
    return ImageRef(domain=domain, path=path, tag=tag, digest=digest)
