"""The words of a cloud change gpubot waits for: progress, done, timeout, Ctrl-C, failure."""

from __future__ import annotations

import pytest

from bot.core import operations
from bot.core.operations import Change, Pending

GKE_CHECK = operations.gke_check(project="p", location="us-central1-a", operation="operation-1")
CREATING = Pending(Change.CREATE, "GKE", "gpu-t4", "RUNNING", GKE_CHECK)
DELETING = Pending(Change.DELETE, "EKS", "gpu-ng", "DELETING", "aws eks describe-nodegroup ...")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (20, "20s"),
        (60, "1m"),
        (70, "1m10s"),
        (125, "2m05s"),
        (3900, "1h5m"),
        (-3, "0s"),
    ],
)
def test_duration_text(seconds: float, text: str) -> None:
    assert operations.duration_text(seconds) == text


def test_looks_come_quickly_at_first_then_no_faster_than_the_ceiling() -> None:
    assert [operations.next_delay(n, 5.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert operations.next_delay(1000, 5.0) == 5.0
    assert operations.next_delay(0, 0.1) == 0.1


def test_progress_and_done_lines() -> None:
    assert operations.progress_line(CREATING, 20) == "Creating node pool gpu-t4 ... RUNNING (20s)"
    assert operations.progress_line(DELETING, 61) == "Deleting nodegroup gpu-ng ... DELETING (1m01s)"
    assert (
        operations.done_line(Change.CREATE, "GKE", "gpu-t4", 70)
        == "Creating node pool gpu-t4 ... done in 1m10s"
    )


def test_a_timeout_and_a_ctrl_c_say_the_change_carries_on_and_how_to_check_it() -> None:
    assert operations.timeout_text(CREATING, 1800) == (
        "stopped waiting after 30m (still RUNNING). GKE carries on creating gpu-t4; check it with: "
        "gcloud container operations describe operation-1 --project p --location us-central1-a"
    )
    assert operations.interrupted_text(DELETING) == (
        "stopped waiting (Ctrl-C). EKS carries on deleting gpu-ng; "
        "check it with: aws eks describe-nodegroup ..."
    )


def test_eks_checks_name_the_nodegroup_or_the_update() -> None:
    assert operations.eks_check(cluster="ml", nodegroup="gpu-ng", region="us-east-1") == (
        "aws eks describe-nodegroup --cluster-name ml --nodegroup-name gpu-ng --region us-east-1"
    )
    assert operations.eks_check(cluster="ml", nodegroup="gpu-ng", region="", update_id="u-1") == (
        "aws eks describe-update --name ml --nodegroup-name gpu-ng --update-id u-1"
    )


def test_a_failure_gives_the_clouds_reason_once() -> None:
    assert operations.failed_text(Change.RESIZE, "EKS", "gpu-ng", "the update ended Failed.", "aws ...") == (
        "EKS could not resize nodegroup gpu-ng: the update ended Failed. Details: aws ..."
    )
