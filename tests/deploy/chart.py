"""The chart rendered with given values, and the lookups the chart tests share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.deploy import helmlite

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpubot"
TOKENS: dict[str, Any] = {"slack": {"botToken": "xoxb-test-bot", "appToken": "xapp-test-app"}}
"""The least an install needs: the chart refuses to render without the Socket Mode tokens."""

Obj = dict[str, Any]


CUSTOM: dict[str, Any] = {
    "replicaCount": 3,
    "cloud": {"provider": "gke", "cluster": "ml", "gkeProject": "acme-ml", "gkeLocation": "europe-west4"},
    "warm": {
        "schedules": ["gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin", "a100 min 2 mon 08:00-10:00 UTC"],
        "configMap": "ml-warm",
    },
    "image": {
        "repository": "europe-docker.pkg.dev/acme/ml/gpubot",
        "tag": "0.1.0-rc1",
        "pullPolicy": "Always",
    },
    "imagePullSecrets": [{"name": "registry"}],
    "workloadNamespace": "gpu-jobs",
    "slack": {"mode": "http", "existingSecret": "slack-tokens", "httpPort": 3001, "scaleChannel": "C0GPUOPS"},
    "admins": ["U0ALICE", "U0BOB"],
    "quota": {"maxGpusPerUser": 4},
    "leases": {"defaultHours": 2.5, "maxHours": 12, "maxTotalHours": 48},
    "reaper": {"dryRun": True, "idleThresholdPercent": 10, "idleWindowMinutes": 30},
    "prometheus": {
        "url": "http://prometheus-operated.monitoring:9090",
        "gpuMetric": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    },
    "redis": {"existingSecret": "redis-url", "keyPrefix": "gpubot-prod:"},
    "leaderElection": {"leaseName": "ml-gpubot-lease"},
    "health": {"port": 9090},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}},
    "logLevel": "DEBUG",
    "logFormat": "text",
    "serviceAccount": {
        "annotations": {"iam.gke.io/gcp-service-account": "gpubot@acme.iam.gserviceaccount.com"}
    },
    "podAnnotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
    "nodeSelector": {"cloud.google.com/gke-nodepool": "default-pool"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "gpubot"}},
                    },
                }
            ]
        }
    },
}
EXISTING_SECRETS = {
    "slack-tokens": {"SLACK_BOT_TOKEN": "xoxb-made-by-hand", "SLACK_SIGNING_SECRET": "signing-secret"},
    "redis-url": {"REDIS_URL": "redis://:hunter2@redis.data:6379/1"},
}
RENDERS: dict[str, Callable[[], list[Obj]]] = {
    "defaults": lambda: render(),
    "custom": lambda: render(CUSTOM, release="ml-gpubot", namespace="gpubot-system"),
}


def render(
    values: Mapping[str, Any] | None = None, *, release: str = "gpubot", namespace: str = "gpubot"
) -> list[Obj]:
    """The chart's objects for `TOKENS` merged with `values`."""
    merged = helmlite.merge_values(TOKENS, values or {})
    return helmlite.render_chart(CHART, release=release, namespace=namespace, values=merged).manifests()


def find(objects: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, rendered {len(found)}"
    return found[0]


def container(objects: list[Obj]) -> Obj:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["gpubot"]
    return dict(containers[0])


def env_entries(objects: list[Obj]) -> dict[str, Obj]:
    entries = container(objects)["env"]
    names = [entry["name"] for entry in entries]
    assert len(names) == len(set(names)), f"an env var is set twice: {names}"
    return {entry["name"]: entry for entry in entries}


def resolve_env(
    objects: list[Obj], *, pod_name: str, secrets: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """The environment the container would get: literals, the downward API, and Secret keys.

    Secret data comes from the rendered Secrets and from `secrets` (the ones an operator made beforehand).
    """
    known = {s["metadata"]["name"]: s.get("stringData", {}) for s in find(objects, "Secret")} | dict(secrets)
    environ: dict[str, str] = {}
    for name, entry in env_entries(objects).items():
        if "value" in entry:
            environ[name] = entry["value"]
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name", source
            environ[name] = pod_name
            continue
        ref = source["secretKeyRef"]
        data = known.get(ref["name"])
        assert data is not None, f"{name} reads Secret {ref['name']}, which is neither rendered nor given"
        if ref["key"] in data:
            environ[name] = data[ref["key"]]
        else:
            assert ref.get("optional"), f"{name}: Secret {ref['name']} has no key {ref['key']}"
    return environ
