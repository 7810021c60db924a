"""The chart rendered by real helm with given values, and the lookups the chart tests share.

helm is found at $GPUBOT_HELM, else at .tools/bin/helm (`python3 tools/install_helm.py` puts it there),
else on PATH. Without one the chart tests fail rather than skip: CI must run them.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpubot"
INSTALLED_HELM = ROOT / ".tools" / "bin" / "helm"
HELM_ENV = "GPUBOT_HELM"
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
    "slack": {
        "mode": "http",
        "existingSecret": "slack-tokens",
        "httpPort": 3001,
        "httpLimits": {"maxBodyBytes": 262144, "headerTimeoutSeconds": 2.5, "workers": 8},
        "scaleChannel": "C0GPUOPS",
        "teamIds": ["T0ML", "T0RESEARCH"],
        "enterpriseIds": ["E0ACME"],
    },
    "admins": ["U0ALICE", "U0BOB"],
    "quota": {"maxGpusPerUser": 4},
    "leases": {"defaultHours": 2.5, "maxHours": 12, "maxTotalHours": 48},
    "reaper": {"dryRun": True, "idleThresholdPercent": 10, "idleWindowMinutes": 30, "brokenStartMinutes": 20},
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
MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "custom": CUSTOM,
    "http mode": {"slack": {"mode": "http", "signingSecret": "signing-secret"}},
    "one replica": {"replicaCount": 1, "leaderElection": {"enabled": False}},
    "three replicas": {"replicaCount": 3},
    "service monitor": {"metrics": {"serviceMonitor": {"enabled": True}}},
    "root workloads": {
        "podSecurity": {"enforce": "baseline", "runAsUser": None, "readOnlyRootFilesystem": True},
        "rbac": {"listPodsInAllNamespaces": True},
    },
    "workloads beside the bot": {"workloadNamespace": "", "podSecurity": {"enforce": ""}},
}
"""Values sets (over `TOKENS`) that every chart-wide check runs on: lint, labels."""
RENDERS: dict[str, Callable[[], list[Obj]]] = {
    "defaults": lambda: render(),
    "custom": lambda: render(CUSTOM, release="ml-gpubot", namespace="gpubot-system"),
}


class HelmError(Exception):
    """helm refused the chart or the values; the message is helm's report (lint's) and its error."""


@functools.cache
def helm() -> str:
    """The helm binary the tests run: helm 3, from $GPUBOT_HELM, .tools/bin/helm or PATH."""
    configured = os.environ.get(HELM_ENV, "")
    if configured:
        found = shutil.which(configured)
        if found is None:
            pytest.fail(f"{HELM_ENV}={configured} is not an executable", pytrace=False)
    else:
        found = str(INSTALLED_HELM) if INSTALLED_HELM.is_file() else shutil.which("helm")
        if found is None:
            pytest.fail(
                "helm is not installed: run `python3 tools/install_helm.py` (it puts helm 3.17 at "
                f".tools/bin/helm), or set {HELM_ENV} to a helm 3 binary",
                pytrace=False,
            )
    version = run_helm([found, "version", "--template", "{{ .Version }}"])
    if not version.startswith("v3."):
        pytest.fail(f"{found} is helm {version}; the chart tests need helm 3", pytrace=False)
    return found


def run_helm(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise HelmError("\n".join(part.strip() for part in (done.stdout, done.stderr) if part.strip()))
    return done.stdout


def helm_with_values(arguments: list[str], values: Mapping[str, Any]) -> str:
    """`helm ARGUMENTS -f tokens -f values`: helm merges the two files as it merges any values files."""
    with tempfile.TemporaryDirectory(prefix="gpubot-chart-") as scratch:
        files = []
        for name, content in (("tokens.json", TOKENS), ("values.json", values)):
            path = Path(scratch) / name
            path.write_text(json.dumps(content), encoding="utf-8")
            files += ["--values", str(path)]
        return run_helm([helm(), *arguments, *files])


@functools.cache
def _template(values_json: str, release: str, namespace: str) -> list[Obj]:
    output = helm_with_values(
        ["template", release, str(CHART), "--namespace", namespace], json.loads(values_json)
    )
    return [doc for doc in yaml.safe_load_all(output) if doc]


def render(
    values: Mapping[str, Any] | None = None, *, release: str = "gpubot", namespace: str = "gpubot"
) -> list[Obj]:
    """The chart's objects for `TOKENS` merged with `values`, as `helm template` renders them.

    Each distinct set of values costs one helm process; the objects are a copy, so a test may change them.
    """
    values_json = json.dumps(values or {}, sort_keys=True)
    return copy.deepcopy(_template(values_json, release, namespace))


def lint(values: Mapping[str, Any]) -> str:
    """`helm lint --strict` over `TOKENS` merged with `values`: its report, or HelmError with it."""
    return helm_with_values(["lint", "--strict", str(CHART)], values)


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
