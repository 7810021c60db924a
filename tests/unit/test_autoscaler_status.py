"""The Cluster Autoscaler's status ConfigMap, read once for `/gpu status`, drain reasons and doctor."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.core import autoscaler_status

MIG = "https://www.googleapis.com/compute/v1/projects/demo/zones/local-a/instanceGroups/gke-demo-gpu-pool-grp"
YAML_STATUS = f"""\
time: "2026-12-03 08:59:50.123456789 +0000 UTC"
autoscalerStatus: Running
clusterWide:
  health: {{status: Healthy}}
nodeGroups:
- name: {MIG}
  health: {{status: Healthy, minSize: 0, maxSize: 5, cloudProviderTarget: 1}}
  scaleDown: {{status: CandidatesPresent, candidates: 1}}
- name: eks-cpu-ng-1a2b
  health: {{status: Unhealthy}}
"""
TEXT_STATUS = """\
Cluster-autoscaler status at 2026-12-03 08:59:50 +0000 UTC:
Cluster-wide:
  Health:      Healthy (ready=3 unready=0 notStarted=0 longNotStarted=0 registered=3)
"""


def test_the_yaml_status_names_each_group_with_its_range_and_scale_down() -> None:
    status = autoscaler_status.parse(YAML_STATUS)
    assert (status.health, status.autoscaler, status.structured) == ("Healthy", "Running", True)
    gpu = status.group("gpu-pool")
    assert gpu == autoscaler_status.NodeGroup(MIG, "Healthy", 0, 5, "CandidatesPresent", 1)
    assert status.sizes() == {MIG: (0, 5)}
    assert status.pool_sizes() == {"gpu-pool": (0, 5)}
    unhealthy = status.groups[1]
    assert (unhealthy.health, unhealthy.min_size, unhealthy.scale_down) == ("Unhealthy", None, "")


def test_the_plain_text_status_gives_only_the_cluster_wide_health() -> None:
    status = autoscaler_status.parse(TEXT_STATUS)
    assert (status.health, status.structured, status.groups) == ("Healthy", False, ())
    assert status.pool_sizes() == {}


def test_nothing_readable_is_a_status_that_says_nothing() -> None:
    for text in (None, "", "{not yaml", "- a list"):
        status = autoscaler_status.parse(text)
        assert (status.health, status.structured, status.groups) == ("", False, ())


def test_status_times_are_read_as_the_autoscaler_writes_them() -> None:
    assert autoscaler_status.parse_last_updated("2026-12-03 08:59:50.123456789 +0000 UTC") == datetime(
        2026, 12, 3, 8, 59, 50, 123456, tzinfo=UTC
    )
    assert autoscaler_status.parse_last_updated("yesterday") is None
