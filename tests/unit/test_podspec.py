"""The Pod manifest: the fields the seed got wrong, right; accepted by the official client's models."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from bot import profiles
from bot.core import commands, labels, models, podspec, workloads

NOW = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
T4 = profiles.load_profile_catalog(profiles.BUILTIN_PROFILES_YAML).profiles["t4"]
ALICE = models.Owner(user_id="U01ALICE", user_name="alice", team_id="T0TEAM")
SEED_TEXT = "run nvidia/cuda:12.4.1-base-ubuntu22.04 -- sleep 3600"


def _request(text: str) -> models.RunRequest:
    parsed = commands.parse_gpu_command(text)
    assert isinstance(parsed, models.RunRequest), parsed
    return parsed


def _build(text: str = SEED_TEXT, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "now": NOW,
        "lease": timedelta(hours=4),
        "channel": "C0GPU",
        "thread_ts": "1714564800.000100",
        "namespace": "default",
    }
    arguments.update(overrides)
    profile = arguments.pop("profile", T4)
    owner = arguments.pop("owner", ALICE)
    return podspec.build_pod(_request(text), profile, owner, **arguments)


def _through_official_client(manifest: dict[str, Any]) -> dict[str, Any]:
    """Deserialize into V1Pod as the client does for API responses, and serialize back.

    A misspelled field (the seed's `important:`) would vanish on the way, so the round trip must be lossless.
    """
    api = client.ApiClient()
    pod = api.deserialize(json.dumps(manifest), "V1Pod", "application/json")
    assert isinstance(pod, client.V1Pod)
    serialized: dict[str, Any] = api.sanitize_for_serialization(pod)  # type: ignore[no-untyped-call]
    return serialized


def test_seed_pod_done_right() -> None:
    pod = _build()
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert spec["nodeSelector"] == {"app-type": "gpu-workloads"}
    assert spec["restartPolicy"] == "Never"
    assert container["image"] == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert container["command"] == ["sleep", "3600"]
    assert "args" not in container
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "8Gi", "nvidia.com/gpu": "1"},
    }
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False


def test_labels_and_annotations() -> None:
    metadata = _build()["metadata"]
    assert metadata["labels"] == {
        "app.kubernetes.io/managed-by": "gpubot",
        "app.kubernetes.io/component": "gpu-workload",
        "gpubot.dev/owner": "U01ALICE",
        "gpubot.dev/profile": "t4",
    }
    notes = metadata["annotations"]
    assert notes[labels.CHANNEL_ANNOTATION] == "C0GPU"
    assert notes[labels.THREAD_TS_ANNOTATION] == "1714564800.000100"
    assert notes[labels.REQUESTER_ANNOTATION] == "U01ALICE"
    assert notes[labels.REQUESTER_NAME_ANNOTATION] == "alice"
    assert notes[labels.TEAM_ANNOTATION] == "T0TEAM"
    assert notes[labels.REQUESTED_AT_ANNOTATION] == "2024-05-01T12:00:00Z"
    assert notes[labels.LEASE_END_ANNOTATION] == "2024-05-01T16:00:00Z"
    assert notes[labels.LEASE_HOURS_ANNOTATION] == "4"
    assert notes[labels.COMMAND_ANNOTATION] == f"/gpu {SEED_TEXT}"
    assert json.loads(notes[labels.AUDIT_ANNOTATION]) == [
        {
            "action": "run",
            "actor": "U01ALICE",
            "at": "2024-05-01T12:00:00Z",
            "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
            "gpus": "1",
            "profile": "t4",
        }
    ]
    assert all(isinstance(value, str) for value in notes.values())


def test_requested_resources_override_profile_defaults() -> None:
    pod = _build(
        "run img --gpus 2 --cpu 500m --memory 1.5Gi", profile=models.GpuProfile(name="a100", max_count=8)
    )
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1536Mi", "nvidia.com/gpu": "2"},
        "limits": {"memory": "1536Mi", "nvidia.com/gpu": "2"},
    }
    assert pod["metadata"]["labels"]["gpubot.dev/profile"] == "a100"


def test_no_command_keeps_the_image_default_and_never_adds_a_shell() -> None:
    assert "command" not in _build("run img")["spec"]["containers"][0]
    hostile = _build("run img -- sh -c 'rm -rf / ; echo $(id)'")["spec"]["containers"][0]
    assert hostile["command"] == ["sh", "-c", "rm -rf / ; echo $(id)"]


def test_generated_name_is_deterministic_per_thread() -> None:
    first, again = _build()["metadata"]["name"], _build()["metadata"]["name"]
    other_thread = _build(thread_ts="1714564900.000200")["metadata"]["name"]
    assert first == again != other_thread
    assert re.fullmatch(r"gpu-u01alice-[0-9a-f]{6}", first)
    assert _build("run img --name train-1")["metadata"]["name"] == "train-1"


@pytest.mark.parametrize(
    ("user_id", "label", "name_prefix"),
    [
        ("U01ABC", "U01ABC", "gpu-u01abc-"),
        ("W012_ENT.x", "W012_ENT.x", "gpu-w012-ent-x-"),
        ("bob smith <evil>", None, "gpu-bob-smith-evil-"),
        ("-_-", None, "gpu-user-"),
        ("ü" * 80, None, "gpu-user-"),
        ("U" * 90, None, "gpu-" + "u" * 24 + "-"),
    ],
)
def test_user_text_is_made_label_and_name_safe(user_id: str, label: str | None, name_prefix: str) -> None:
    pod = _build(owner=models.Owner(user_id=user_id))
    owner_label = pod["metadata"]["labels"][labels.OWNER_LABEL]
    assert labels.is_label_value(owner_label)
    if label is not None:
        assert owner_label == label
    assert pod["metadata"]["annotations"][labels.REQUESTER_ANNOTATION] == user_id
    assert pod["metadata"]["name"].startswith(name_prefix)
    assert labels.is_dns1123_label(pod["metadata"]["name"])


def test_distinct_unsafe_values_get_distinct_labels() -> None:
    assert labels.to_label_value("a b") != labels.to_label_value("a  b")
    assert labels.to_label_value("x" * 100) != labels.to_label_value("x" * 101)
    assert all(labels.is_label_value(labels.to_label_value(v)) for v in ("", "a b", "x" * 100, "!!!", "é"))


def test_thread_less_and_security_options() -> None:
    security = models.PodSecurity(
        run_as_non_root=True,
        run_as_user=1000,
        read_only_root_filesystem=True,
        service_account_name="runner",
        priority_class_name="gpu-batch",
        image_pull_secrets=("regcred",),
    )
    pod = _build(thread_ts=None, security=security)
    spec = pod["spec"]
    assert labels.THREAD_TS_ANNOTATION not in pod["metadata"]["annotations"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 1000
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["serviceAccountName"] == "runner"
    assert spec["priorityClassName"] == "gpu-batch"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert _through_official_client(pod) == pod


@pytest.mark.parametrize(
    ("toleration", "manifest"),
    [
        (
            models.Toleration(key="k", value="v", effect="NoSchedule"),
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
        ),
        (models.Toleration(key="k", operator="Exists"), {"key": "k", "operator": "Exists"}),
        (
            models.Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=30),
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ),
    ],
)
def test_toleration_field_names(toleration: models.Toleration, manifest: dict[str, Any]) -> None:
    assert podspec.toleration_manifest(toleration) == manifest


def test_long_commands_are_clipped_in_the_annotation() -> None:
    text = "run img -- echo " + "x" * 10_000  # longer than the parser takes; the pod is bounded all the same
    long = models.RunRequest(image="img", command=("echo", "x" * 10_000), text=text)
    pod = podspec.build_pod(
        long,
        T4,
        ALICE,
        now=NOW,
        lease=timedelta(hours=4),
        channel="C0GPU",
        thread_ts="1.2",
        namespace="default",
    )
    assert len(pod["metadata"]["annotations"][labels.COMMAND_ANNOTATION]) == labels.ANNOTATION_TEXT_MAX
    assert len(pod["spec"]["containers"][0]["command"][1]) == 10_000


def test_times() -> None:
    assert (
        podspec.format_time(datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))))
        == "2024-05-01T12:00:00Z"
    )
    assert podspec.parse_time("2024-05-01T12:00:00Z") == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert podspec.parse_time("yesterday") is None
    assert podspec.parse_time("2024-05-01T12:00:00") is None
    with pytest.raises(ValueError, match="timezone-aware"):
        podspec.format_time(datetime(2024, 5, 1))


def test_audit_append_keeps_history() -> None:
    existing = _build()["metadata"]["annotations"][labels.AUDIT_ANNOTATION]
    release = models.AuditEntry(action="release", actor="U0ADMIN", at=NOW + timedelta(hours=1))
    records = json.loads(podspec.append_audit(existing, release))
    assert [r["action"] for r in records] == ["run", "release"]
    assert records[1] == {"action": "release", "actor": "U0ADMIN", "at": "2024-05-01T13:00:00Z"}
    assert json.loads(podspec.append_audit("not json", release))[0] == {"unparsed": "not json"}
    assert len(json.loads(podspec.append_audit(None, release))) == 1


def test_the_workload_read_back_is_what_build_pod_wrote() -> None:
    workload = workloads.from_pod(_build())
    assert workload is not None
    assert workload.owner_id == "U01ALICE" and workload.profile == "t4" and workload.channel == "C0GPU"
    assert workload.thread_ts == "1714564800.000100"
    assert workload.lease_end == datetime(2024, 5, 1, 16, tzinfo=UTC)
    assert workload.command == f"/gpu {SEED_TEXT}"
    assert workloads.from_pod({"metadata": {"name": "other", "labels": {}}}) is None
    assert workloads.from_pod({}) is None


def test_official_client_accepts_the_pod_losslessly() -> None:
    pod = _build()
    assert _through_official_client(pod) == pod


def test_the_round_trip_would_catch_the_seeds_misspelled_toleration() -> None:
    pod = _build()
    pod["spec"]["tolerations"][0]["important"] = pod["spec"]["tolerations"][0].pop("key")
    assert _through_official_client(pod) != pod


_option = st.one_of(
    st.builds(lambda n: f"--gpus {n}", st.integers(min_value=-2, max_value=20)),
    st.builds(lambda h: f"--hours {h}", st.sampled_from(["1", "0.5", "90m", "2h", "700", "0"])),
    st.builds(lambda c: f"--cpu {c}", st.sampled_from(["1", "0.25", "750m", "64", "10m"])),
    st.builds(lambda m: f"--memory {m}", st.sampled_from(["512Mi", "16Gi", "1.5Gi", "100G", "1Ti", "1"])),
    st.builds(lambda n: f"--name {n}", st.from_regex(r"\A[a-z0-9][-a-z0-9]{0,20}\Z")),
)
# Slack escapes `&<>` and clients curl quotes; the parser undoes both, so those are left out of the argv here.
_arg_chars = st.characters(
    codec="utf-8", exclude_categories=["Cs"], exclude_characters="&<>\u201c\u201d\u2018\u2019"
)
_args = st.lists(st.text(alphabet=_arg_chars, max_size=12), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["ubuntu", "nvidia/cuda:12.4.1-base-ubuntu22.04", "nvcr.io/nvidia/pytorch:24.01-py3"]),
    st.lists(_option, max_size=4),
    _args,
    st.text(max_size=20),
)
def test_any_accepted_run_yields_a_pod_the_official_client_accepts(
    image: str, options: list[str], argv: list[str], user_id: str
) -> None:
    text = " ".join(["run", image, *options, "--", *(shlex.quote(a) for a in argv)])
    parsed = commands.parse_gpu_command(text)
    if not isinstance(parsed, models.RunRequest):
        return
    profile = models.GpuProfile(
        name="any", max_count=16, tolerations=T4.tolerations, node_selector=T4.node_selector
    )
    pod = podspec.build_pod(
        parsed,
        profile,
        models.Owner(user_id=user_id),
        now=NOW,
        lease=timedelta(hours=parsed.hours or 4),
        channel="C0GPU",
        thread_ts="1.2",
        namespace="default",
    )
    assert _through_official_client(pod) == pod
    assert pod["spec"]["containers"][0].get("command", []) == argv
    assert labels.is_dns1123_label(pod["metadata"]["name"])
    assert all(labels.is_label_value(value) for value in pod["metadata"]["labels"].values())


def test_the_audit_annotation_keeps_only_the_newest_records() -> None:
    existing = _build()["metadata"]["annotations"][labels.AUDIT_ANNOTATION]
    for hour in range(1, podspec.AUDIT_RECORDS_KEPT + 5):
        entry = models.AuditEntry(action="release", actor=f"U{hour}", at=NOW + timedelta(hours=hour))
        existing = podspec.append_audit(existing, entry)
    records = json.loads(existing)
    assert len(records) == podspec.AUDIT_RECORDS_KEPT == 20
    assert records[0]["actor"] == "U5" and records[-1]["actor"] == f"U{podspec.AUDIT_RECORDS_KEPT + 4}"
    assert all(r["action"] == "release" for r in records)  # the run record aged out
    admin = models.AuditEntry(action="release", actor="U0ADMIN", at=NOW)
    newest_two = json.loads(podspec.append_audit(existing, admin, keep=2))
    assert [r["actor"] for r in newest_two] == ["U24", "U0ADMIN"]


def test_an_unreadable_audit_value_is_kept_clipped() -> None:
    release = models.AuditEntry(action="release", actor="U0ADMIN", at=NOW)
    (kept, added) = json.loads(podspec.append_audit("x" * 300_000, release))
    assert len(kept["unparsed"]) == labels.ANNOTATION_TEXT_MAX and added["action"] == "release"
    assert json.loads(podspec.append_audit('{"a": 1}', release))[0] == {"unparsed": '{"a": 1}'}


@pytest.mark.parametrize(("actor", "by"), [("U01ALICE", "owner"), ("U0ADMIN", "admin")])
def test_a_release_records_who_when_and_in_what_role(actor: str, by: str) -> None:
    entry = podspec.release_audit_entry(actor, owner_id="U01ALICE", now=NOW)
    assert podspec.audit_fields(entry) == {
        "action": "release",
        "actor": actor,
        "at": "2024-05-01T12:00:00Z",
        "by": by,
    }


def test_an_extension_records_who_by_how_much_and_the_new_end() -> None:
    end = NOW + timedelta(hours=6)
    entry = podspec.extension_audit_entry("U0ADMIN", hours=1.5, lease_end=end, now=NOW)
    assert podspec.audit_fields(entry) == {
        "action": "extend",
        "actor": "U0ADMIN",
        "at": "2024-05-01T12:00:00Z",
        "hours": "1.5",
        "lease_end": "2024-05-01T18:00:00Z",
    }


def test_a_keep_records_until_when() -> None:
    entry = podspec.keep_audit_entry("U01ALICE", kept_until=NOW + timedelta(minutes=45), now=NOW)
    assert podspec.audit_fields(entry)["kept_until"] == "2024-05-01T12:45:00Z"
    assert (entry.action, entry.actor) == ("keep", "U01ALICE")


@pytest.mark.parametrize(
    ("length", "hours"),
    [(timedelta(hours=6), "6"), (timedelta(minutes=90), "1.5"), (timedelta(hours=1, seconds=1), "1")],
)
def test_lease_annotations_give_the_end_and_the_whole_length(length: timedelta, hours: str) -> None:
    notes = podspec.lease_annotations(requested_at=NOW, lease_end=NOW + length)
    assert notes == {
        labels.LEASE_END_ANNOTATION: podspec.format_time(NOW + length),
        labels.LEASE_HOURS_ANNOTATION: hours,
    }
