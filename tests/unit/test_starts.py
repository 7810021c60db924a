"""Broken starts: when a pod that cannot start gives its GPU back, and the words its owner reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import starts

T0 = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
LIMIT = timedelta(minutes=10)
MIN = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("reason", "since", "now", "due"),
    [
        ("ImagePullBackOff", T0, T0 + 9 * MIN, False),
        ("ImagePullBackOff", T0, T0 + 10 * MIN, True),
        ("ErrImagePull", T0, T0 + 10 * MIN, True),  # the two alternate: either counts from the start
        ("CrashLoopBackOff", T0, T0 + 11 * MIN, True),
        ("CreateContainerConfigError", T0, T0 + 10 * MIN, True),
        ("CreateContainerConfigError", T0, T0 + 2 * MIN, False),  # a secret created late still counts
        ("InvalidImageName", T0, T0, True),  # can never start: at once
        ("ErrImageNeverPull", None, T0, True),
        ("ContainerCreating", T0, T0 + 60 * MIN, False),  # slow is not broken
        ("PodInitializing", T0, T0 + 60 * MIN, False),
        ("", T0, T0 + 60 * MIN, False),  # running, or not on a node yet
        ("ImagePullBackOff", None, T0 + 60 * MIN, False),  # no start time: nothing to count from
    ],
)
def test_a_broken_start_is_due_after_the_limit_and_a_hopeless_one_at_once(
    reason: str, since: datetime | None, now: datetime, due: bool
) -> None:
    assert starts.is_due(starts.Start(reason, "", since), now, LIMIT) is due


PULL_DETAIL = (
    "rpc error: code = NotFound desc = failed to pull and unpack image "
    '"docker.io/library/foo:bar": failed to resolve reference "docker.io/library/foo:bar": not found'
)
PULL_EVENT = f'Failed to pull image "foo:bar": {PULL_DETAIL}'
"""The kubelet's Failed event; the ErrImagePull waiting message is the runtime's error alone
(image_manager.go)."""


@pytest.mark.parametrize(
    ("reason", "message", "detail", "what", "fix"),
    [
        (
            "ImagePullBackOff",
            'Back-off pulling image "foo:bar"',
            PULL_EVENT,
            f"the image `foo:bar` could not be pulled (ImagePullBackOff: {PULL_EVENT})",
            "Check the image name and tag, then `/gpu run` again.",
        ),
        (
            "ErrImagePull",
            PULL_DETAIL,
            "",
            f"the image `foo:bar` could not be pulled (ErrImagePull: {starts.clip(PULL_DETAIL)})",
            "Check the image name and tag, then `/gpu run` again.",
        ),
        (
            "CreateContainerConfigError",
            'secret "hf-token" not found',
            "",
            'its container could not be configured (CreateContainerConfigError: secret "hf-token" not found)',
            "Ask an admin about the missing secret or config map, then `/gpu run` again.",
        ),
        (
            "CrashLoopBackOff",
            "",
            "",
            "its container kept crashing (CrashLoopBackOff)",
            "Check the command and the image, then `/gpu run` again.",
        ),
        (
            "InvalidImageName",
            'Failed to apply default image tag "Foo:Bar": couldn\'t parse image name',
            "",
            "the image name `foo:bar` is not valid (InvalidImageName: Failed to apply default image tag "
            '"Foo:Bar": couldn\'t parse image name)',
            "Fix the image name, then `/gpu run` again.",
        ),
    ],
)
def test_each_reason_in_plain_words_with_the_clusters_own(
    reason: str, message: str, detail: str, what: str, fix: str
) -> None:
    assert starts.describe(starts.Start(reason, message, T0), image="foo:bar", detail=detail) == (what, fix)


def test_a_long_message_is_clipped_to_one_line() -> None:
    said = starts.clip("registry says:\n" + "x" * 1000)
    assert "\n" not in said and len(said) == starts.DETAIL_MAX and said.endswith("…")
