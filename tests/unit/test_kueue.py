"""A Kueue-managed pod's place, admission and reason to wait, from Kueue v0.19.2's own object shapes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot import profiles
from bot.core import doctor_facts, doctor_kueue, kueue, lifecycle, models, podspec, queue, status, workloads
from bot.services import kueue_line
from bot.settings import SettingsError

T0 = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"
# Kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go, `fitsResourceQuota`, the two messages, as
# `Assignment.Message` prefixes them ("couldn't assign flavors to pod set main: ").
QUOTA_IN_USE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor t4, "
    "1 more needed"
)
TOO_BIG = (
    "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor t4, previously "
    "considered podsets requests (0) + current podset request (4) > maximum capacity (2)"
)


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def workload_obj(
    name: str,
    *,
    created: datetime = T0,
    gpus: int = 1,
    priority: int | None = None,
    conditions: list[dict[str, Any]] | None = None,
    cluster_queue: str = "",
) -> dict[str, Any]:
    """A Workload as Kueue's pod integration makes it (apis/kueue/v1beta2/workload_types.go)."""
    spec: dict[str, Any] = {
        "queueName": "team-a",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "main", "resources": {"limits": {GPU: str(gpus)}}}]}
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {"conditions": conditions or []}
    if cluster_queue:
        status["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": []}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "namespace": "gpu",
            "name": f"pod-{name}-1a2b3",
            "uid": f"uid-{name}",
            "creationTimestamp": podspec.format_time(created),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": f"pod-{name}"}],
        },
        "spec": spec,
        "status": status,
    }


def held(reason: str, message: str) -> list[dict[str, Any]]:
    return [{"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}]


ADMITTED = [
    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved"},
    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"},
]


def read(obj: dict[str, Any]) -> kueue.Workload:
    return kueue.read_workload(obj, resource=GPU)


def test_a_workload_names_its_pod_queue_gpus_and_whether_it_is_admitted() -> None:
    waiting = read(workload_obj("a", gpus=2, priority=5, conditions=held("Pending", QUOTA_IN_USE)))
    assert (waiting.pod_uid, waiting.queue, waiting.gpus, waiting.priority) == ("pod-a", "team-a", 2, 5)
    assert not waiting.admitted and waiting.waiting_message == QUOTA_IN_USE
    admitted = read(workload_obj("b", conditions=ADMITTED, cluster_queue="cq"))
    assert admitted.admitted and admitted.reserved_in == "cq" and admitted.waiting_message == ""


def test_quota_reserved_without_admission_is_not_admitted() -> None:
    """Admission checks may still be pending: `Admitted` is the word, not `QuotaReserved`."""
    reserved = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}]
    found = read(workload_obj("a", conditions=reserved, cluster_queue="cq"))
    assert not found.admitted and found.reserved_in == "cq"


def test_without_the_visibility_api_the_order_is_priority_then_age() -> None:
    pending = [
        read(workload_obj("late", created=minutes(2))),
        read(workload_obj("early", created=minutes(1))),
        read(workload_obj("urgent", created=minutes(3), priority=100)),
    ]
    found = kueue.places(pending, [], free=0, summary=None)
    assert {key.split("-")[1]: p.position for key, p in found.items()} == {"urgent": 1, "early": 2, "late": 3}


def test_the_visibility_api_says_the_place_and_counts_from_zero() -> None:
    pending = [read(workload_obj("a", created=minutes(1))), read(workload_obj("b", created=minutes(2)))]
    summary = kueue.read_summary(
        {
            "kind": "PendingWorkloadsSummary",
            "items": [
                {"metadata": {"namespace": "gpu", "name": "pod-x-1a2b3"}, "positionInClusterQueue": 0},
                {"metadata": {"namespace": "gpu", "name": "pod-b-1a2b3"}, "positionInClusterQueue": 1},
                {"metadata": {"namespace": "gpu", "name": "pod-a-1a2b3"}, "positionInClusterQueue": 2},
            ],
        }
    )
    found = kueue.places(pending, [], free=0, summary=summary)
    assert found["gpu/pod-b-1a2b3"].position == 2 and found["gpu/pod-a-1a2b3"].position == 3


def test_a_workload_the_visibility_api_leaves_out_has_no_place() -> None:
    pending = [read(workload_obj("a"))]
    assert kueue.places(pending, [], free=0, summary={}) == {}


def test_admitted_workloads_are_not_in_line() -> None:
    pending = [read(workload_obj("a", conditions=ADMITTED, cluster_queue="cq")), read(workload_obj("b"))]
    assert list(kueue.places(pending, [], free=0, summary=None)) == ["gpu/pod-b-1a2b3"]


def test_the_eta_counts_the_quota_left_free_before_the_holders_leases() -> None:
    holders = [queue.Holder(1, likely=minutes(20), latest=minutes(35))]
    pending = [
        read(workload_obj("a", gpus=2, created=minutes(0))),
        read(workload_obj("b", created=minutes(1))),
    ]
    found = kueue.places(pending, holders, free=1, summary=None)
    a, b = found["gpu/pod-a-1a2b3"], found["gpu/pod-b-1a2b3"]
    assert (a.soonest, a.latest) == (minutes(20), minutes(35))  # one free + the holder's one
    assert b.soonest is None and not b.free_now  # a third GPU nobody gpubot knows gives back
    text = queue.wait_text(a, T0, line="Kueue queue team-a")
    assert text == "#1 in line (Kueue queue team-a), about 20 to 35 min"


def test_a_run_that_fits_in_the_free_quota_is_next_without_anyone_leaving() -> None:
    found = kueue.places([read(workload_obj("a"))], [], free=1, summary=None)
    assert found["gpu/pod-a-1a2b3"].free_now
    assert "its GPUs are free" in queue.wait_text(found["gpu/pod-a-1a2b3"], T0)


def test_a_cluster_queue_quota_is_summed_over_flavors() -> None:
    found = kueue.read_cluster_queue(
        {
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", GPU],
                        "flavors": [
                            {
                                "name": "t4",
                                "resources": [
                                    {"name": GPU, "nominalQuota": 2},
                                    {"name": "cpu", "nominalQuota": "8"},
                                ],
                            },
                            {"name": "t4-spot", "resources": [{"name": GPU, "nominalQuota": "1"}]},
                        ],
                    }
                ]
            },
            "status": {"flavorsReservation": [{"name": "t4", "resources": [{"name": GPU, "total": "2"}]}]},
        }
    )
    assert found.quota[GPU] == 3 and found.free(GPU) == 1 and found.free("example.com/none") == 0


@pytest.mark.parametrize(
    ("reason", "message", "key", "words"),
    [
        ("Pending", QUOTA_IN_USE, "kueue-quota", "has its GPU quota in use: 1 more nvidia.com/gpu needed"),
        (
            "ExceedsMaxQuota",
            TOO_BIG,
            "kueue-too-big",
            "more than the Kueue queue team-a can ever give (2 nvidia.com/gpu)",
        ),
        (
            "Misconfigured",
            "LocalQueue team-a doesn't exist",
            "kueue-misconfigured",
            "LocalQueue team-a doesn't exist",
        ),
        ("Suspended", "ClusterQueue cq is inactive", "kueue-stopped", "is stopped"),
    ],
)
def test_the_reason_to_wait_is_said_in_plain_words(reason: str, message: str, key: str, words: str) -> None:
    problem = kueue.waiting_problem(read(workload_obj("a", conditions=held(reason, message))), "team-a")
    assert problem is not None and problem.key == key and words in problem.summary


def test_quota_in_use_is_not_a_full_pool() -> None:
    problem = kueue.waiting_problem(
        read(workload_obj("a", conditions=held("Pending", QUOTA_IN_USE))), "team-a"
    )
    assert problem is not None and "pool" not in problem.summary and "maximum" not in problem.summary


def test_nothing_said_before_kueue_looked() -> None:
    assert kueue.waiting_problem(read(workload_obj("a")), "team-a") is None


# -- the profile field, the pod label, and the thread ---------------------------------------------------


def test_a_profile_queue_becomes_the_pods_kueue_label() -> None:
    catalog = profiles.load_profile_catalog("profiles:\n  t4: {queue: team-a}\n")
    profile = catalog.profiles["t4"]
    assert profile.queue == "team-a"
    found = podspec.pod_labels(models.Owner("U1"), profile)
    assert found["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in podspec.pod_labels(models.Owner("U1"), models.GpuProfile("x"))


@pytest.mark.parametrize("name", ["Team_A", "-a", "a" * 64, "7"])
def test_a_queue_that_is_no_local_queue_name_is_refused(name: str) -> None:
    text = "profiles:\n  t4: {queue: 7}\n" if name == "7" else f"profiles:\n  t4: {{queue: '{name}'}}\n"
    with pytest.raises(SettingsError, match=r"profiles\.t4\.queue: .* is not a LocalQueue name"):
        profiles.load_profile_catalog(text)


def kueue_thread(observations: list[lifecycle.Observation]) -> status.Thread:
    workload = workloads.Workload(
        name="a", namespace="gpu", uid="pod-a", owner_id="U1", requester_name="", profile="t4", channel="C",
        thread_ts="1.0", lease_end=None, requested_at=T0, gpus=1, phase="Pending", node="", command="",
        deletion_requested=False, queue="team-a",
    )  # fmt: skip
    thread = status.Thread(workload=workload, progress=lifecycle.Progress(created=T0))
    for seen in observations:
        progress, new = lifecycle.advance(thread.progress, seen)
        thread = status.Thread(
            workload=workload,
            progress=progress,
            problem=next((m.problem for m in new if m.problem), thread.problem)
            if progress.step is None
            else None,
        )
    return thread


def test_a_quota_wait_is_in_line_and_admission_takes_it_out() -> None:
    problem = kueue.waiting_problem(
        read(workload_obj("a", conditions=held("Pending", QUOTA_IN_USE))), "team-a"
    )
    waiting = kueue_thread([lifecycle.KueueSeen(minutes(1), admitted=False, queue="team-a", problem=problem)])
    assert status.in_line(waiting)
    assert status.headline(waiting, "#2 in line (Kueue queue team-a), about 20 to 35 min") == (
        "Waiting for a GPU: #2 in line (Kueue queue team-a), about 20 to 35 min"
    )
    admitted = kueue_thread(
        [
            lifecycle.KueueSeen(minutes(1), admitted=False, queue="team-a", problem=problem),
            lifecycle.KueueSeen(minutes(9), admitted=True, queue="team-a"),
        ]
    )
    assert not status.in_line(admitted)
    assert admitted.progress.at(lifecycle.Step.ADMITTED) == minutes(9)
    assert status.headline(admitted) == "Admitted by Kueue: waiting for the scheduler"
    assert "admitted by Kueue +9m" in " ".join(status.timeline(admitted.progress))


def test_before_kueue_speaks_the_thread_says_kueue_holds_it() -> None:
    assert status.headline(kueue_thread([])) == "Waiting for Kueue to admit it (queue team-a)"


def test_doctor_says_to_install_kueue_when_its_api_is_not_served() -> None:
    queued = {"t4": models.GpuProfile("t4", queue="team-a"), "plain": models.GpuProfile("plain")}
    (check,) = doctor_kueue.kueue_checks(queued, doctor_facts.KueueFacts(served=False), "gpu")
    assert check.status is doctor_facts.Status.FAIL and "profiles t4 submit to Kueue" in check.message
    assert "install Kueue v0.19.2" in check.fix
    assert doctor_kueue.kueue_checks({"plain": models.GpuProfile("plain")}, None, "gpu") == []


def test_doctor_fails_a_cluster_queue_without_quota_for_the_profiles_resource() -> None:
    facts = doctor_facts.KueueFacts(
        served=True,
        local_queues={"team-a": "cq"},
        cluster_queues={"cq": kueue.ClusterQueue("cq", quota={"cpu": 8}, reserved={})},
    )
    (check,) = doctor_kueue.kueue_checks({"t4": models.GpuProfile("t4", queue="team-a")}, facts, "gpu")
    assert check.status is doctor_facts.Status.FAIL and "no quota for nvidia.com/gpu" in check.message


def test_a_workload_update_gpubot_does_not_read_asks_the_visibility_api_nothing() -> None:
    reads: list[str] = []

    def read_pending(local_queue: str) -> dict[str, Any] | None:
        reads.append(local_queue)
        return None

    line = kueue_line.KueueLine(
        [models.GpuProfile(name="t4", queue="team-a")], read_pending=read_pending, clock=lambda: T0
    )
    told: list[str] = []
    line.listen(lambda key, seen: told.append(key))
    waiting = workload_obj("a", conditions=held("Pending", QUOTA_IN_USE))
    line.on_workload("ADDED", waiting)
    bumped = {**waiting, "metadata": {**waiting["metadata"], "resourceVersion": "2"}}
    line.on_workload("MODIFIED", bumped)
    assert reads == ["team-a"] and told == ["gpu/a", ""]
    line.on_workload("MODIFIED", workload_obj("a", conditions=ADMITTED, cluster_queue="cq"))
    assert reads == ["team-a", "team-a"] and told == ["gpu/a", "", "gpu/a", ""]
