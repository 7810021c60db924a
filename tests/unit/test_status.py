"""`/gpu status`'s pool lines: nodes, GPUs, autoscaler bounds and what the pool costs right now."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from bot import profiles as profiles_module
from bot.core import labels, lifecycle, models, notices, status, workloads

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PROFILES = profiles_module.load_profile_catalog(profiles_module.BUILTIN_PROFILES_YAML).profiles
T4 = PROFILES["t4"]
GPU_NODE_LABELS = {labels.GKE_NODEPOOL_LABEL: "gpu-pool", "app-type": "gpu-workloads"}


def gpu_node(name: str, *, ready: bool = True, gpus: int = 1, pool: str = "gpu-pool") -> lifecycle.NodeSeen:
    node_labels = GPU_NODE_LABELS | {labels.GKE_NODEPOOL_LABEL: pool}
    return lifecycle.NodeSeen(name, ready=ready, gpus=gpus, pool=pool, labels=node_labels, at=T0)


def running_on(node: str) -> workloads.Workload:
    return workloads.Workload(
        name="gpu-alice-1",
        namespace="default",
        uid="u-1",
        owner_id="U_ALICE",
        requester_name="alice",
        profile="t4",
        channel="C_GPU",
        thread_ts="1.2",
        lease_end=None,
        requested_at=T0,
        gpus=1,
        phase="Running",
        node=node,
        command="/gpu run ubuntu",
        deletion_requested=False,
    )


def test_a_pool_line_says_what_the_pool_costs_now() -> None:
    (view,) = status.pool_views(
        [gpu_node("n1")], [running_on("n1")], {"gpu-pool": (0, 5)}, profiles=PROFILES.values()
    )
    assert view.price_per_hour == T4.price_per_hour == 0.54
    assert status.pool_line(view) == (
        "• gpu-pool: 1 node(s) ready, 0 provisioning · GPUs 0 free, 1 used · size 0 to 5 · ≈ $0.54/h now"
    )


def test_provisioning_nodes_cost_too() -> None:
    nodes = [gpu_node("n1"), gpu_node("n2", ready=False, gpus=0), gpu_node("n3", ready=True, gpus=0)]
    (view,) = status.pool_views(nodes, [], {}, profiles=[T4])
    assert (view.ready, view.provisioning, view.nodes_up) == (1, 2, 3)
    assert status.pool_line(view).endswith("GPUs 1 free, 0 used · ≈ $1.62/h now")


def test_a_pool_at_zero_costs_nothing_even_at_an_unknown_price() -> None:
    (view,) = status.pool_views([], [], {"gpu-pool": (0, 5)}, profiles=[T4])
    assert view.price_per_hour is None
    assert status.pool_line(view) == (
        "• gpu-pool: 0 node(s) ready, 0 provisioning · GPUs 0 free, 0 used · size 0 to 5 · $0/h now"
    )


@pytest.mark.parametrize(
    "profiles",
    [
        [],
        [models.GpuProfile(name="a100", node_selector=(("app-type", "other"),), price_per_hour=3.67)],
        [models.GpuProfile(name="free", node_selector=T4.node_selector, price_per_hour=0.0)],
    ],
    ids=["no profiles", "no profile matches the nodes", "the matching profile has no price"],
)
def test_an_unknown_price_leaves_the_cost_out(profiles: list[models.GpuProfile]) -> None:
    (view,) = status.pool_views([gpu_node("n1")], [], {}, profiles=profiles)
    line = status.pool_line(view)
    assert view.price_per_hour is None and "$" not in line
    assert line == "• gpu-pool: 1 node(s) ready, 0 provisioning · GPUs 1 free, 0 used"


def test_each_pool_is_priced_by_its_own_nodes() -> None:
    accelerator = "cloud.google.com/gke-accelerator"
    a100 = models.GpuProfile(
        name="a100", node_selector=((accelerator, "nvidia-tesla-a100"),), price_per_hour=3.67
    )
    a100_labels = {labels.GKE_NODEPOOL_LABEL: "a100-pool", accelerator: "nvidia-tesla-a100"}
    big = lifecycle.NodeSeen("a1", ready=True, gpus=1, pool="a100-pool", labels=a100_labels, at=T0)
    views = status.pool_views([big, gpu_node("n1"), gpu_node("n2")], [], {}, profiles=[T4, a100])
    assert [(v.name, status.cost_text(v)) for v in views] == [
        ("a100-pool", "≈ $3.67/h now"),
        ("gpu-pool", "≈ $1.08/h now"),
    ]


T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
Step, Outcome = lifecycle.Step, lifecycle.Outcome


@pytest.mark.parametrize(
    ("progress", "shown"),
    [
        (lifecycle.Progress(T0), False),
        (lifecycle.Progress(T0, reached=((Step.SCHEDULED, T0),)), False),
        (lifecycle.Progress(T0, reached=((Step.RUNNING, T0),)), True),
        (lifecycle.Progress(T0, outcome=Outcome.FAILED), True),
        (lifecycle.Progress(T0, outcome=Outcome.SUCCEEDED), True),
        (lifecycle.Progress(T0, reached=((Step.RUNNING, T0),), outcome=Outcome.DELETED, gone=True), False),
    ],
)
def test_the_logs_button_shows_while_there_is_output_to_read(
    progress: lifecycle.Progress, shown: bool
) -> None:
    assert status.has_output(progress) is shown


@pytest.mark.parametrize(
    ("milestone", "said"),
    [
        (lifecycle.Milestone(Step.RUNNING, T0 + timedelta(minutes=3), "Running"),
         "<U_ALICE> Running on gpu-1, 3m00s after the request."),
        (lifecycle.Milestone(Step.RUNNING, T0, "Running", late=True), None),
        (lifecycle.Milestone(Step.SCALE_UP, T0, "scale-up triggered"), None),
        (lifecycle.Milestone(Step.NODE_READY, T0, "node gpu-1 is Ready"), None),
        (lifecycle.Milestone(None, T0, "failed: exit 3", outcome=Outcome.FAILED), "<U_ALICE> Failed: exit 3"),
        (lifecycle.Milestone(None, T0, "succeeded", outcome=Outcome.SUCCEEDED), "<U_ALICE> Succeeded"),
        (lifecycle.Milestone(None, T0, "deleted", outcome=Outcome.DELETED),
         "<U_ALICE> Deleted outside gpubot (by someone with cluster access); its GPU is back in the pool."),
    ],
)  # fmt: skip
def test_the_owner_is_told_when_it_runs_and_when_it_ends_by_itself_or_outside_gpubot(
    milestone: lifecycle.Milestone, said: str | None
) -> None:
    thread = status.Thread(running_on("gpu-1"), lifecycle.Progress(T0, node="gpu-1"))
    reply = status.milestone_reply(milestone, thread)
    assert (f"<{reply.mention}> {reply.text}" if reply is not None else None) == said


def test_a_run_seen_running_and_ended_at_once_is_told_only_how_it_ended() -> None:
    running = lifecycle.Milestone(Step.RUNNING, T0 + timedelta(seconds=30), "Running")
    ended = lifecycle.Progress(T0, node="gpu-1", outcome=Outcome.FAILED)
    assert status.milestone_reply(running, status.Thread(running_on("gpu-1"), ended)) is None


def test_a_release_or_reap_is_said_by_whoever_did_it_not_by_the_tracker() -> None:
    milestone = lifecycle.Milestone(None, T0, "deleted", outcome=Outcome.DELETED)
    for record in ({"action": "release", "actor": "U_ALICE"}, {"action": "reap", "reason": "expire"}):
        audit = json.dumps([{"action": "run", "actor": "U_ALICE"}, record])
        thread = status.Thread(dataclasses.replace(running_on("gpu-1"), audit=audit), lifecycle.Progress(T0))
        assert status.milestone_reply(milestone, thread) is None


def test_a_pod_placed_on_a_node_already_up_is_not_told_of_a_node_coming_up() -> None:
    reached = ((Step.WAITING, T0), (Step.SCHEDULED, T0 + timedelta(seconds=4)),
               (Step.RUNNING, T0 + timedelta(seconds=9)))  # fmt: skip
    thread = status.Thread(running_on("gpu-1"), lifecycle.Progress(T0, reached=reached, node="gpu-1"))
    shown = status.thread_status(thread)
    assert shown.headline == "Running on gpu-1"
    assert shown.timeline == (f"requested {notices.clock_time(T0)}", "scheduled +4s", "Running +9s")


def deleted(audit: list[dict[str, str]]) -> str:
    workload = dataclasses.replace(running_on("gpu-1"), audit=json.dumps(audit))
    return status.deleted_headline(workload)


def test_a_deleted_pod_is_headed_by_who_deleted_it() -> None:
    run = {"action": "run", "actor": "U_ALICE"}
    assert deleted([run, {"action": "release", "actor": "U_ALICE"}]).startswith("Released by its owner;")
    assert deleted([run, {"action": "release", "actor": "U_ADMIN"}]).startswith("Released by admin U_ADMIN;")
    expired = deleted([run, {"action": "reap", "actor": "gpubot", "reason": "expire"}])
    assert expired.startswith("Deleted: its lease ended and nobody extended it")
    idle = deleted([run, {"action": "reap", "actor": "gpubot", "reason": "idle-release"}])
    assert idle.startswith("Deleted by the idle reaper")
    assert deleted([run]).startswith("Deleted outside gpubot")


def test_a_finished_run_keeps_its_ending_once_its_pod_is_gone_and_loses_its_logs_button() -> None:
    ran = lifecycle.Progress(T0, reached=((Step.RUNNING, T0),))
    failed, _ = lifecycle.advance(
        ran, lifecycle.PodSeen(T0, "Failed", exit_code=1, terminated_reason="Error")
    )
    gone, said = lifecycle.advance(failed, lifecycle.PodSeen(T0, "Failed", exit_code=1, deleted=True))
    assert gone.outcome is Outcome.FAILED and gone.gone and said == []
    assert status.has_output(failed) and not status.has_output(gone)
