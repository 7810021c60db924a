"""The Helm chart, rendered by `helm template` with default and with non-default values, checked object by
object.

Kinds the embedded cluster serves (ConfigMap, and the Deployment's pod template as a Pod) are created there
with `dryRun=All` and strict field validation; the other kinds are decoded strictly against the official
client's models, as the embedded API server decodes what it serves.
"""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import client

from bot import profiles as profiles_module
from bot.core import labels
from sim.cluster import resources, schema, world
from tests.deploy import chart

SERVED_BY_SIM = {
    "ConfigMap": (client.CoreV1Api, "namespaced_config_map"),
    "Pod": (client.CoreV1Api, "namespaced_pod"),
    "ServiceAccount": (client.CoreV1Api, "namespaced_service_account"),
    "Role": (client.RbacAuthorizationV1Api, "namespaced_role"),
    "RoleBinding": (client.RbacAuthorizationV1Api, "namespaced_role_binding"),
    "ClusterRole": (client.RbacAuthorizationV1Api, "cluster_role"),
    "ClusterRoleBinding": (client.RbacAuthorizationV1Api, "cluster_role_binding"),
    "PodDisruptionBudget": (client.PolicyV1Api, "namespaced_pod_disruption_budget"),
}
"""Kinds the embedded cluster serves: the client API and the method suffix that creates and reads one."""
CLIENT_MODELS = {
    "Deployment": ("apps/v1", "V1Deployment"),
    "Service": ("v1", "V1Service"),
    "Secret": ("v1", "V1Secret"),
}
"""Kinds the embedded cluster does not serve: checked against the client's model instead. (The Namespace is
served cluster-scoped; tests/deploy/test_helm_pod_security.py creates it on the sim.)"""
SERVICE_MONITOR_FIELDS = {
    "spec": {"selector", "endpoints", "namespaceSelector", "jobLabel"},
    "endpoint": {"port", "path", "interval", "scrapeTimeout", "scheme"},
}
"""The ServiceMonitor (monitoring.coreos.com/v1, a CRD with no client model) fields the chart may set."""


@pytest.fixture(params=sorted(chart.RENDERS))
def rendered(request: pytest.FixtureRequest) -> list[chart.Obj]:
    return chart.RENDERS[request.param]()


def keys(objects: list[chart.Obj]) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects}


def pod_from_template(objects: list[chart.Obj]) -> chart.Obj:
    deployment = chart.one(objects, "Deployment")
    template = deployment["spec"]["template"]
    metadata = {
        "name": f"{deployment['metadata']['name']}-template",
        "namespace": deployment["metadata"]["namespace"],
        **template["metadata"],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def test_defaults_render_the_bot_its_identity_rbac_and_config() -> None:
    assert keys(chart.render()) == {
        ("ServiceAccount", "gpubot", "gpubot"),
        ("Namespace", "", "gpubot-workloads"),
        ("Role", "gpubot-workloads", "gpubot"),
        ("RoleBinding", "gpubot-workloads", "gpubot"),
        ("ClusterRole", "", "gpubot-gpubot"),
        ("ClusterRoleBinding", "", "gpubot-gpubot"),
        ("Role", "kube-system", "gpubot-gpubot-autoscaler-status"),
        ("RoleBinding", "kube-system", "gpubot-gpubot-autoscaler-status"),
        ("Secret", "gpubot", "gpubot-slack"),
        ("ConfigMap", "gpubot", "gpubot-profiles"),
        ("Deployment", "gpubot", "gpubot"),
        ("Service", "gpubot", "gpubot"),
        ("PodDisruptionBudget", "gpubot", "gpubot"),
    }
    assert chart.one(chart.render(), "Deployment")["spec"]["replicas"] == 2


def test_custom_values_use_existing_secrets_and_add_a_service_monitor() -> None:
    objects = chart.RENDERS["custom"]()
    assert not chart.find(objects, "Secret")
    assert ("ServiceMonitor", "gpubot-system", "ml-gpubot") in keys(objects)
    assert ("Role", "gpu-jobs", "ml-gpubot") in keys(objects)
    assert ("RoleBinding", "gpu-jobs", "ml-gpubot") in keys(objects)
    spec = chart.one(objects, "Deployment")["spec"]
    assert spec["replicas"] == 3
    assert (
        spec["template"]["spec"]["containers"][0]["image"] == "europe-docker.pkg.dev/acme/ml/gpubot:0.1.0-rc1"
    )
    assert spec["template"]["spec"]["affinity"] == chart.CUSTOM["affinity"]


def test_served_kinds_pass_server_side_dry_run_on_the_sim(
    rendered: list[chart.Obj], sim: world.BackgroundWorld
) -> None:
    served = [o for o in rendered if o["kind"] in SERVED_BY_SIM] + [pod_from_template(rendered)]
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        core = client.CoreV1Api(api)
        existing = {None, *world.SYSTEM_NAMESPACES, *world.WORKLOAD_NAMESPACES}
        namespaces = {o["metadata"].get("namespace") for o in served} - existing
        for namespace in sorted(namespaces):
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        for obj in served:
            assert any(r.kind == obj["kind"] and r.api_version == obj["apiVersion"] for r in resources.ALL)
            api_class, suffix = SERVED_BY_SIM[obj["kind"]]
            where = [obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
            name = obj["metadata"]["name"]
            response = getattr(api_class(api), f"create_{suffix}")(
                *where, obj, dry_run="All", field_validation="Strict", _preload_content=False
            )
            accepted = json.loads(response.data)
            assert response.status == 201 and accepted["metadata"]["uid"], accepted
            assert accepted["metadata"]["name"] == name
            with pytest.raises(client.ApiException) as not_stored:
                getattr(api_class(api), f"read_{suffix}")(name, *where)
            assert not_stored.value.status == 404


def test_other_kinds_decode_strictly_into_the_client_models(rendered: list[chart.Obj]) -> None:
    served = {r.kind for r in resources.ALL}
    for obj in rendered:
        if obj["kind"] in ("ServiceMonitor", "Namespace") or obj["kind"] in SERVED_BY_SIM:
            continue
        assert obj["kind"] in CLIENT_MODELS, f"{obj['kind']}: add it to SERVED_BY_SIM or CLIENT_MODELS"
        assert obj["kind"] not in served, f"the sim serves {obj['kind']} now: create it there instead"
        api_version, model = CLIENT_MODELS[obj["kind"]]
        where = f"{obj['kind']} {obj['metadata']['name']}"
        assert obj["apiVersion"] == api_version, where
        assert schema.type_errors(model, obj) == [], where
        assert schema.unknown_fields(model, obj) == [], where
        assert schema.check_client_model(model, obj) is None, where


def test_the_service_monitor_scrapes_the_metrics_port_of_the_service() -> None:
    objects = chart.RENDERS["custom"]()
    monitor, service = chart.one(objects, "ServiceMonitor"), chart.one(objects, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert set(monitor["spec"]) <= SERVICE_MONITOR_FIELDS["spec"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert set(endpoint) <= SERVICE_MONITOR_FIELDS["endpoint"]
        assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    assert not chart.find(chart.render(), "ServiceMonitor")


def test_references_between_objects_resolve(rendered: list[chart.Obj]) -> None:
    deployment, service = chart.one(rendered, "Deployment"), chart.one(rendered, "Service")
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["serviceAccountName"] == chart.one(rendered, "ServiceAccount")["metadata"]["name"]
    container_ports = {p["name"] for p in chart.container(rendered)["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
    config_maps = {v["configMap"]["name"] for v in pod["spec"]["volumes"] if "configMap" in v}
    assert config_maps == {o["metadata"]["name"] for o in chart.find(rendered, "ConfigMap")}
    mounts = {m["name"] for m in chart.container(rendered)["volumeMounts"]}
    assert mounts == {v["name"] for v in pod["spec"]["volumes"]}
    chart.resolve_env(rendered, pod_name="gpubot-0", secrets=chart.EXISTING_SECRETS)  # every Secret key found


def test_names_labels_and_annotations_are_valid(rendered: list[chart.Obj]) -> None:
    for obj in rendered:
        metadata = obj["metadata"]
        for part in metadata["name"].split("."):
            assert labels.is_dns1123_label(part), metadata["name"]
        for key, value in (metadata.get("labels") or {}).items():
            assert labels.is_qualified_name(key) and labels.is_label_value(value), (key, value)
        for key, value in (metadata.get("annotations") or {}).items():
            assert labels.is_qualified_name(key) and isinstance(value, str), (key, value)


def test_the_pod_runs_as_non_root_on_a_read_only_root_without_capabilities(rendered: list[chart.Obj]) -> None:
    pod_security = chart.one(rendered, "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0
    security = chart.container(rendered)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"cpu", "memory"} <= set(chart.container(rendered)["resources"]["requests"])


def test_probes_ask_the_health_endpoints_on_the_health_port(rendered: list[chart.Obj]) -> None:
    container = chart.container(rendered)
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    assert chart.env_entries(rendered)["GPUBOT_HEALTH_PORT"]["value"] == str(port)
    probes = {
        name: container[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes == {
        "startupProbe": {"path": "/healthz", "port": "http"},
        "livenessProbe": {"path": "/healthz", "port": "http"},
        "readinessProbe": {"path": "/readyz", "port": "http"},
    }


def test_the_profiles_config_map_is_deploy_profiles_and_mounted_where_the_bot_reads(
    rendered: list[chart.Obj],
) -> None:
    config_map = chart.one(rendered, "ConfigMap")
    shipped = (chart.ROOT / "deploy" / "profiles.yaml").read_text(encoding="utf-8")
    (key,) = config_map["data"]
    loaded = profiles_module.load_profile_catalog(config_map["data"][key])
    assert loaded == profiles_module.load_profile_catalog(shipped)
    volume = next(v["name"] for v in chart.one(rendered, "Deployment")["spec"]["template"]["spec"]["volumes"])
    mount = next(m for m in chart.container(rendered)["volumeMounts"] if m["name"] == volume)
    assert chart.env_entries(rendered)["GPUBOT_PROFILES_FILE"]["value"] == f"{mount['mountPath']}/{key}"


def test_a_profile_change_rolls_the_pods() -> None:
    def checksum(objects: list[chart.Obj]) -> str:
        return str(
            chart.one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"][
                "checksum/profiles"
            ]
        )

    cheaper = {"profiles": {"profiles": {"t4": {"pricePerHour": 0.35}}}}
    assert checksum(chart.render()) == checksum(chart.render())
    assert checksum(chart.render()) != checksum(chart.render(cheaper))


@pytest.mark.parametrize(
    ("slack", "message"),
    [
        ({"botToken": ""}, "slack.botToken is required"),
        ({"appToken": ""}, "slack.appToken is required in Socket Mode"),
        ({"mode": "http"}, "slack.signingSecret is required in HTTP mode"),
    ],
)
def test_a_missing_token_is_refused_naming_the_value_to_set(slack: dict[str, str], message: str) -> None:
    with pytest.raises(chart.HelmError, match=message):
        chart.render({"slack": slack})
    chart.render({"slack": {**slack, "existingSecret": "made-by-hand"}})


def test_every_object_carries_the_standard_labels() -> None:
    version = yaml.safe_load((chart.CHART / "Chart.yaml").read_text(encoding="utf-8"))
    for name, values in chart.MATRIX.items():
        for obj in chart.render(values, release="ml-gpubot", namespace="gpubot-system"):
            assert (
                obj["metadata"]["labels"].items()
                >= {
                    "app.kubernetes.io/name": "gpubot",
                    "app.kubernetes.io/instance": "ml-gpubot",
                    "app.kubernetes.io/version": version["appVersion"],
                    "app.kubernetes.io/managed-by": "Helm",
                    "helm.sh/chart": f"gpubot-{version['version']}",
                }.items()
            ), f"{name}: {obj['kind']} {obj['metadata']['name']}"


def test_selectors_are_name_and_instance_only(rendered: list[chart.Obj]) -> None:
    """A Deployment's selector cannot change after install, so it stays what the first chart had."""
    release = chart.one(rendered, "Deployment")["metadata"]["name"]
    selector = {"app.kubernetes.io/name": "gpubot", "app.kubernetes.io/instance": release}
    assert chart.one(rendered, "Deployment")["spec"]["selector"] == {"matchLabels": selector}
    assert chart.one(rendered, "Service")["spec"]["selector"] == selector
    assert chart.one(rendered, "PodDisruptionBudget")["spec"]["selector"] == {"matchLabels": selector}
    for monitor in chart.find(rendered, "ServiceMonitor"):
        assert monitor["spec"]["selector"] == {"matchLabels": selector}


@pytest.mark.parametrize("replicas", [2, 3])
def test_several_replicas_get_a_disruption_budget_of_one_pod(replicas: int) -> None:
    objects = chart.render({"replicaCount": replicas})
    budget, deployment = chart.one(objects, "PodDisruptionBudget"), chart.one(objects, "Deployment")
    assert budget["apiVersion"] == "policy/v1"
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_one_replica_gets_no_disruption_budget() -> None:
    objects = chart.render(chart.MATRIX["one replica"])
    assert chart.one(objects, "Deployment")["spec"]["replicas"] == 1
    assert not chart.find(objects, "PodDisruptionBudget")
