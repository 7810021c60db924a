"""Why a pool is not draining, as a table: the nodes, the pods on them and the autoscaler's status in,
the reasons (and their fixes) out."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml

from bot import settings
from bot.core import drain
from bot.core.cluster_nodes import Node
from bot.core.drain import Cause, PodFacts

POOL = "gpu-pool"
GROUP = (
    "https://www.googleapis.com/compute/v1/projects/demo/zones/local-a/instanceGroups/gke-demo-gpu-pool-grp"
)
NODE = Node("gke-demo-gpu-pool-ab12-x1y2", labels={"cloud.google.com/gke-nodepool": POOL})
EKS_NODE = Node("ip-10-0-0-1", labels={"eks.amazonaws.com/nodegroup": POOL})
NOT_SAFE = {drain.SAFE_TO_EVICT: "false"}


def status(
    *, scale_down: str = "NoCandidates", health: str = "Healthy", group: str = GROUP, running: str = "Running"
) -> str:
    return yaml.safe_dump(
        {
            "time": "2026-01-05 09:30:00.000000000 +0000 UTC",
            "autoscalerStatus": running,
            "nodeGroups": [
                {
                    "name": group,
                    "health": {"status": health, "minSize": 0, "maxSize": 5, "cloudProviderTarget": 1},
                    "scaleDown": {"status": scale_down, "candidates": int(scale_down == "CandidatesPresent")},
                }
            ],
        }
    )


def pod(
    name: str,
    *owners: str,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
    terminating: bool = False,
    managed: bool = False,
) -> PodFacts:
    return PodFacts(
        namespace,
        name,
        owner_kinds=owners,
        annotations=annotations or {},
        phase=phase,
        terminating=terminating,
        managed=managed,
    )


QUIET = status(scale_down="CandidatesPresent")
"""A status that adds a reason of its own only when asked about."""


@pytest.mark.parametrize(
    ("nodes", "pods", "status_text", "min_size", "causes"),
    [
        pytest.param([NODE], [], QUIET, 0, [Cause.AUTOSCALER], id="nothing-holds-it-but-candidates"),
        pytest.param(
            [NODE], [pod("fluentd", "DaemonSet")], status(), 0, [Cause.AUTOSCALER], id="daemonset-is-ignored"
        ),
        pytest.param(
            [NODE],
            [pod("kube-proxy", namespace="kube-system", annotations={drain.MIRROR: "x"})],
            status(),
            0,
            [Cause.AUTOSCALER],
            id="mirror-pod-is-ignored",
        ),
        pytest.param(
            [NODE],
            [
                pod("done", phase="Succeeded"),
                pod("leaving", "ReplicaSet", terminating=True),
                pod("gpu-alice-1a2b", managed=True),
            ],
            status(),
            0,
            [Cause.AUTOSCALER],
            id="finished-leaving-and-gpubot-pods-are-ignored",
        ),
        pytest.param(
            [NODE],
            [pod("pinned", "ReplicaSet", annotations=NOT_SAFE)],
            status(),
            0,
            [Cause.NOT_SAFE_TO_EVICT, Cause.AUTOSCALER],
            id="safe-to-evict-false-wins-over-a-controller",
        ),
        pytest.param(
            [NODE], [pod("notebook")], status(), 0, [Cause.NO_CONTROLLER, Cause.AUTOSCALER], id="bare"
        ),
        pytest.param(
            [NODE],
            [pod("notebook", annotations={drain.SAFE_TO_EVICT: "true"})],
            status(),
            0,
            [Cause.MUST_MOVE, Cause.AUTOSCALER],
            id="safe-to-evict-true-overrides-no-controller",
        ),
        pytest.param(
            [NODE],
            [pod("metrics", "ReplicaSet", namespace="kube-system")],
            status(),
            0,
            [Cause.KUBE_SYSTEM, Cause.AUTOSCALER],
            id="kube-system",
        ),
        pytest.param(
            [NODE],
            [pod("web", "ReplicaSet")],
            status(),
            0,
            [Cause.MUST_MOVE, Cause.AUTOSCALER],
            id="deployment-pod-tolerating-the-taint",
        ),
        pytest.param(
            [Node(NODE.name, annotations={drain.SCALE_DOWN_DISABLED: "true"})],
            [],
            status(),
            0,
            [Cause.NODE_OPTED_OUT, Cause.AUTOSCALER],
            id="node-opted-out",
        ),
        pytest.param(
            [Node(NODE.name, annotations={drain.SCALE_DOWN_DISABLED: "false"})],
            [],
            QUIET,
            0,
            [Cause.AUTOSCALER],
            id="opt-out-false-is-no-opt-out",
        ),
        pytest.param([NODE], [], QUIET, 1, [Cause.MIN_SIZE], id="min-size"),
        pytest.param([NODE], [], status(health="Unhealthy"), 0, [Cause.AUTOSCALER], id="unhealthy-group"),
        pytest.param([NODE], [], None, 0, [Cause.AUTOSCALER], id="no-autoscaler-status"),
        pytest.param([NODE], [], status(group="eks-other-asg"), 0, [Cause.AUTOSCALER], id="pool-not-managed"),
        pytest.param([NODE], [], status(running="Initializing"), 0, [Cause.AUTOSCALER], id="initializing"),
        pytest.param(
            [NODE],
            [],
            "Cluster-autoscaler status at 2026-01-05:\nHealthy",
            0,
            [Cause.UNKNOWN],
            id="old-format",
        ),
        pytest.param(
            [NODE],
            [pod("web", "ReplicaSet"), pod("a", annotations=NOT_SAFE), pod("b")],
            status(),
            2,
            [Cause.NOT_SAFE_TO_EVICT, Cause.NO_CONTROLLER, Cause.MUST_MOVE, Cause.MIN_SIZE, Cause.AUTOSCALER],
            id="several-most-actionable-first",
        ),
    ],
)
def test_diagnose(
    nodes: list[Node],
    pods: list[PodFacts],
    status_text: str | None,
    min_size: int,
    causes: list[Cause],
) -> None:
    reasons = drain.diagnose(POOL, nodes=nodes, pods=pods, status_text=status_text, min_size=min_size)
    assert [r.cause for r in reasons] == causes
    assert all(r.summary and r.fix for r in reasons)


def test_a_blocking_pod_is_named_with_its_reason_and_fix() -> None:
    (reason, _) = drain.diagnose(
        POOL,
        nodes=[NODE],
        pods=[pod("notebook", namespace="ml", annotations=NOT_SAFE)],
        status_text=status(),
        min_size=0,
    )
    assert "ml/notebook" in reason.summary and 'safe-to-evict: "false"' in reason.summary
    assert "kubectl delete pod -n ml notebook" in reason.fix
    assert f"kubectl annotate pod -n ml notebook {drain.SAFE_TO_EVICT}-" in reason.fix


def test_only_a_few_pods_are_named_and_the_rest_counted() -> None:
    pods = [pod(f"job-{i}") for i in range(5)]
    (reason, _) = drain.diagnose(POOL, nodes=[NODE], pods=pods, status_text=status(), min_size=0)
    assert reason.summary.startswith("default/job-0, default/job-1, default/job-2 and 2 more are bare pods")


@pytest.mark.parametrize(
    ("node", "command"),
    [
        (
            NODE,
            "gcloud container node-pools update gpu-pool --enable-autoscaling --min-nodes 0 --max-nodes 5",
        ),
        (EKS_NODE, "aws eks update-nodegroup-config --nodegroup-name gpu-pool --scaling-config minSize=0"),
    ],
)
def test_the_minimum_size_fix_is_the_pools_clouds_command(node: Node, command: str) -> None:
    (reason,) = drain.diagnose(POOL, nodes=[node], pods=[], status_text=QUIET, min_size=1)
    assert reason.summary == "gpu-pool's minimum size is 1, so the autoscaler always keeps at least 1 node"
    assert command in reason.fix


def test_read_pod_and_node_from_the_api_json() -> None:
    read = drain.read_pod(
        {
            "metadata": {
                "namespace": "ml",
                "name": "nb",
                "labels": {"app.kubernetes.io/managed-by": "gpubot"},
                "annotations": {drain.SAFE_TO_EVICT: "false"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "nb-1"}],
                "deletionTimestamp": "2026-01-05T09:00:00Z",
            },
            "status": {"phase": "Running"},
        }
    )
    assert read == PodFacts(
        "ml", "nb", ("ReplicaSet",), {drain.SAFE_TO_EVICT: "false"}, "Running", terminating=True, managed=True
    )
    assert drain.read_pod({"metadata": {"name": "odd", "ownerReferences": "junk"}}) == PodFacts(
        "", "odd", phase="Pending"
    )


def test_describe_asks_the_question_then_lists_each_reason_with_its_fix() -> None:
    reasons = [drain.Reason(Cause.MIN_SIZE, "the minimum keeps a node", "set it to 0")]
    text = drain.describe(POOL, reasons, nodes=1, idle=timedelta(minutes=16))
    assert text.split("\n") == [
        "Why isn't gpu-pool draining? It still has 1 node, 16m00s after gpubot's last workload left:",
        "• the minimum keeps a node. Fix: set it to 0",
    ]


SOCKET_ENV = {"SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_APP_TOKEN": "xapp-secret"}


def test_the_expected_drain_time_is_a_setting() -> None:
    assert settings.Settings.from_env(SOCKET_ENV).reaper.drain_expected_minutes == 15
    assert timedelta(minutes=15) == drain.DRAIN_EXPECTED
    loaded = settings.Settings.from_env({**SOCKET_ENV, "GPUBOT_DRAIN_EXPECTED_MINUTES": "25"})
    assert loaded.reaper.drain_expected_minutes == 25
    with pytest.raises(settings.SettingsError, match="GPUBOT_DRAIN_EXPECTED_MINUTES='soon'"):
        settings.Settings.from_env({**SOCKET_ENV, "GPUBOT_DRAIN_EXPECTED_MINUTES": "soon"})
