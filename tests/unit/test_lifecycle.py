"""The progress state machine, fed the exact upstream messages the scheduler, autoscaler and kubelet emit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core import explain, lifecycle
from bot.core.lifecycle import EventSeen, NodeSeen, Outcome, PodSeen, Progress, Step

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
GROUP = (
    "https://www.googleapis.com/compute/v1/projects/demo/zones/local-a/instanceGroups/gke-demo-gpu-pool-grp"
)
NO_NODE = (
    "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: "
    "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def feed(observations: list[lifecycle.Observation]) -> tuple[Progress, list[lifecycle.Milestone]]:
    progress, out = Progress(created=T0), []
    for seen in observations:
        progress, new = lifecycle.advance(progress, seen)
        out += new
    return progress, out


SEED_JOURNEY: list[lifecycle.Observation] = [
    EventSeen(at(0), "FailedScheduling", NO_NODE, "Warning"),
    EventSeen(at(40), "TriggeredScaleUp", f"pod triggered scale-up: [{{{GROUP} 0->1 (max: 5)}}]"),
    EventSeen(at(60), "FailedScheduling", NO_NODE, "Warning"),
    NodeSeen("gke-demo-gpu-pool-ab12cd34-x1y2", ready=False, gpus=0, pool="gpu-pool", at=at(130)),
    NodeSeen("gke-demo-gpu-pool-ab12cd34-x1y2", ready=True, gpus=0, pool="gpu-pool", at=at(160)),
    NodeSeen("gke-demo-gpu-pool-ab12cd34-x1y2", ready=True, gpus=1, pool="gpu-pool", at=at(280)),
    EventSeen(
        at(280), "Scheduled", "Successfully assigned default/gpu-pod to gke-demo-gpu-pool-ab12cd34-x1y2"
    ),
    PodSeen(at(280), "Pending", node="gke-demo-gpu-pool-ab12cd34-x1y2", waiting_reason="ContainerCreating"),
    EventSeen(at(281), "Pulling", 'Pulling image "nvidia/cuda:12.2.0-base-ubuntu22.04"'),
    PodSeen(at(370), "Running", node="gke-demo-gpu-pool-ab12cd34-x1y2"),
]


def test_the_seed_journey_reaches_every_step_once_in_order() -> None:
    progress, milestones = feed(SEED_JOURNEY + SEED_JOURNEY)  # repeats change nothing
    steps = [m.step for m in milestones]
    assert steps == [step for step in Step if step is not Step.ADMITTED]  # no Kueue on the seed
    assert [m.at for m in milestones] == [at(0), at(40), at(130), at(160), at(280), at(280), at(281), at(370)]
    assert milestones[0].text == "waiting for a GPU node: the GPU pool has no nodes yet"
    assert milestones[1].text == "scale-up triggered: gpu-pool 0→1 (max 5)"
    assert progress.node == "gke-demo-gpu-pool-ab12cd34-x1y2"
    assert progress.pool == "gpu-pool"


def test_nodes_of_other_pools_are_not_our_node() -> None:
    _, milestones = feed(
        [*SEED_JOURNEY[:2], NodeSeen("gke-demo-default-pool-1", True, 0, "default-pool", at=at(50))]
    )
    assert Step.PROVISIONING not in [m.step for m in milestones]


@pytest.mark.parametrize(
    ("group", "pool"),
    [
        (GROUP, "gpu-pool"),
        ("https://x/instanceGroups/gke-prod-a100-pool-1a2b3c4d-grp", "a100-pool"),
        ("eks-gpu-ng-asg", "eks-gpu-ng-asg"),
    ],
)
def test_pool_names_from_autoscaler_group_ids(group: str, pool: str) -> None:
    assert lifecycle.pool_name(group) == pool


@pytest.mark.parametrize(
    ("message", "key"),
    [
        ("pod didn't trigger scale-up: 1 max node group size reached", "max-size"),
        ("pod didn't trigger scale-up: 1 node(s) had untolerated taint {nvidia.com/gpu: present}", "taint"),
        ("pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu", "too-many-gpus"),
        ("pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector", "no-pool"),
        (
            "Node scale up in zones local-a associated with this pod failed: GCE out of resources. "
            "Pod is at risk of not being scheduled.",
            "stockout",
        ),
        (
            "Node scale up in zones local-a associated with this pod failed: GCE quota exceeded. "
            "Pod is at risk of not being scheduled.",
            "quota",
        ),
        ("pod didn't trigger scale-up: 1 in backoff after failed scale-up", "backoff"),
    ],
)
def test_no_scale_up_is_explained_with_a_fix(message: str, key: str) -> None:
    _, milestones = feed([EventSeen(at(0), "NotTriggerScaleUp", message)] * 2)
    assert len(milestones) == 1
    problem = milestones[0].problem
    assert problem is not None and problem.key == key and problem.fix


def test_the_newest_start_failure_is_kept_in_the_clusters_own_words() -> None:
    pulled = 'Failed to pull image "foo:bar": rpc error: code = NotFound desc = foo:bar: not found'
    progress, _ = feed(
        [
            EventSeen(at(0), "Failed", pulled, "Warning"),
            EventSeen(at(1), "Failed", "Error: ErrImagePull", "Warning"),  # restates the reason only
            EventSeen(at(2), "BackOff", 'Back-off pulling image "foo:bar"'),
        ]
    )
    assert progress.start_error == pulled


def test_image_pull_failure_names_the_image() -> None:
    message = (
        'Failed to pull image "nvidia/cuda:notfound": rpc error: code = NotFound desc = failed to pull and '
        'unpack image "docker.io/nvidia/cuda:notfound": not found'
    )
    _, milestones = feed([EventSeen(at(0), "Failed", message, "Warning")])
    assert milestones[0].problem == explain.image_pull(message)
    assert "`nvidia/cuda:notfound` does not exist" in milestones[0].text


@pytest.mark.parametrize(
    ("pod", "outcome", "text"),
    [
        (
            PodSeen(at(9), "Succeeded", exit_code=0, terminated_reason="Completed"),
            Outcome.SUCCEEDED,
            "finished: the command exited 0",
        ),
        (
            PodSeen(at(9), "Failed", exit_code=3, terminated_reason="Error"),
            Outcome.FAILED,
            "failed: the command exited 3",
        ),
        (
            PodSeen(at(9), "Failed", exit_code=127, terminated_reason="Error", restarts=2),
            Outcome.FAILED,
            "failed: the command exited 127 (command not found: check its spelling and that the image has "
            "it on its PATH), after 2 restarts",
        ),
        (
            PodSeen(at(9), "Failed", exit_code=137, terminated_reason="OOMKilled"),
            Outcome.FAILED,
            "failed: out of memory (OOMKilled, exit 137)",
        ),
        (PodSeen(at(9), "Running", deleted=True), Outcome.DELETED, "deleted"),
    ],
)
def test_endings(pod: PodSeen, outcome: Outcome, text: str) -> None:
    progress, milestones = feed([pod, pod])
    assert progress.outcome is outcome
    assert milestones[-1].text == text
    assert [m.outcome for m in milestones].count(outcome) == 1


def test_crash_loop_is_a_problem_reported_once() -> None:
    backoff = "Back-off restarting failed container main in pod p_default(uid)"
    _, milestones = feed([EventSeen(at(1), "BackOff", backoff, "Warning")] * 3)
    assert [m.problem.key for m in milestones if m.problem] == ["crash-loop"]


def test_a_step_seen_after_a_later_one_is_recorded_late_not_lost() -> None:
    """The node's GPU update can arrive after the pod's Scheduled event: two watches, no shared order."""
    node = "gke-demo-gpu-pool-ab12cd34-x1y2"
    progress, milestones = feed(
        [
            *SEED_JOURNEY[:5],
            EventSeen(at(280), "Scheduled", f"Successfully assigned default/gpu-pod to {node}"),
            NodeSeen(node, ready=True, gpus=1, pool="gpu-pool", at=at(279)),
        ]
    )
    assert progress.step is Step.SCHEDULED
    assert progress.at(Step.GPU_READY) == at(279)
    assert [(m.step, m.late) for m in milestones[-2:]] == [(Step.SCHEDULED, False), (Step.GPU_READY, True)]


def test_a_node_first_seen_after_the_pod_runs_is_dated_from_its_own_stamps() -> None:
    """The node watch was cut for the whole scale-up: the node is first seen long after the pod runs, so
    each of its steps is dated by the node's creation and Ready transition, and the GPUs by the latest
    moment they can have become allocatable (before the pod was scheduled onto them)."""
    node = "gke-demo-gpu-pool-ab12cd34-x1y2"
    progress, milestones = feed(
        [
            *SEED_JOURNEY[:2],
            EventSeen(at(280), "Scheduled", f"Successfully assigned default/gpu-pod to {node}"),
            PodSeen(at(370), "Running", node=node),
            NodeSeen(
                node, ready=True, gpus=1, pool="gpu-pool", created=at(130), ready_since=at(160), at=at(900)
            ),
        ]
    )
    assert [progress.at(s) for s in (Step.PROVISIONING, Step.NODE_READY, Step.GPU_READY)] == [
        at(130),
        at(160),
        at(280),
    ]
    assert all(m.late for m in milestones[-3:])


def test_an_ending_says_how_long_it_ran_since_running() -> None:
    running = PodSeen(at(60), "Running", node="gpu-1")
    failed = PodSeen(at(60 + 185), "Failed", node="gpu-1", exit_code=1, terminated_reason="Error")
    _, milestones = feed([running, failed])
    assert milestones[-1].text == (
        "failed after 3m05s: the command exited 1 (the program reported an error; its last lines say which)"
    )
    _, milestones = feed([running, PodSeen(at(60 + 42 * 60), "Succeeded", node="gpu-1", exit_code=0)])
    assert milestones[-1].text == "finished after 42m00s: the command exited 0"


@pytest.mark.parametrize(
    ("code", "meaning"),
    [(2, "wrong arguments"), (126, "could not run"), (139, "segmentation fault"), (143, "SIGTERM"),
     (130, "signal 2"), (3, "")],
)  # fmt: skip
def test_exit_codes_are_told_in_plain_words(code: int, meaning: str) -> None:
    said = explain.exit_meaning(code)
    assert (meaning in said) if meaning else said == ""


def test_a_finished_pod_removed_later_keeps_its_ending() -> None:
    """A scale-down or the reaper's cleanup takes a finished pod: it still failed (or succeeded), and its
    GPU was back when it ended; the deletion is no new ending."""
    failed = PodSeen(at(9), "Failed", node="gpu-1", exit_code=3, terminated_reason="Error")
    progress, milestones = feed([failed, PodSeen(at(900), "Failed", node="gpu-1", exit_code=3, deleted=True)])
    assert progress.outcome is Outcome.FAILED and progress.gone
    assert [m.outcome for m in milestones if m.outcome is not None] == [Outcome.FAILED]
