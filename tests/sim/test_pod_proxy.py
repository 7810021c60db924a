"""`pods/proxy` to a notebook's Jupyter Server with the real client: the REST API an idle culler reads,
token-authenticated, and the proxy's refusals in the real apiserver's words."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.cluster import entrypoints, jupyter, world
from tests.sim.test_kubectl import wait_for_pod

NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-python-3.11"


@pytest.fixture
def core(sim: world.BackgroundWorld) -> Iterator[client.CoreV1Api]:
    # Jupyter reads its token from the query, which the generated method cannot add: a path parameter
    # whose `?`, `=` and `&` stay unquoted carries it (the proxy forwards the request's query).
    with client.ApiClient(client.Configuration(host=sim.url, safe_chars_for_path_param="/?=&")) as api:
        yield client.CoreV1Api(api)


def start(sim: world.BackgroundWorld, core: client.CoreV1Api, name: str, image: str, **spec: Any) -> str:
    """A pod on the default pool, Running and past its server's start-up; its uid (the token's seed)."""
    container = client.V1Container(
        name=name, image=image, ports=[client.V1ContainerPort(container_port=8888)]
    )
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(containers=[container], **spec)
    )
    created = core.create_namespaced_pod("default", body)
    sim.advance(150)  # a CUDA notebook image is a large pull
    if not spec:
        wait_for_pod(sim, name, lambda p: p is not None and p["status"].get("phase") == "Running")
    return str(created.metadata.uid)


def get(core: client.CoreV1Api, pod_id: str, path: str, **query: str) -> Any:
    """GET through the proxy; the generated method would turn the JSON into a Python repr, so read raw."""
    full = f"{path}?{urllib.parse.urlencode(query)}" if query else path
    response = core.connect_get_namespaced_pod_proxy_with_path(
        pod_id, "default", full, _preload_content=False
    )
    return json.loads(response.data)


def kernel(sim: world.BackgroundWorld, core: client.CoreV1Api, name: str, state: str | None) -> None:
    core.patch_namespaced_pod(
        name, "default", {"metadata": {"annotations": {jupyter.KERNEL_ANNOTATION: state}}}
    )


def refused(call: Any) -> tuple[int, str | None, str]:
    with pytest.raises(ApiException) as raised:
        call()
    body = json.loads(raised.value.body)
    return raised.value.status, body.get("reason", ""), body["message"]


def test_a_notebook_reports_its_kernels_and_last_activity_to_its_token(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    token = entrypoints.token(start(sim, core, "nb", NOTEBOOK_IMAGE))
    started = get(core, "nb:8888", "api/status", token=token)
    assert started["kernels"] == 0 and started["connections"] == 0
    assert started["last_activity"] == started["started"] and started["started"].endswith("Z")
    assert get(core, "nb:8888", "api/kernels", token=token, no_track_activity="1") == []

    sim.advance(600)
    kernel(sim, core, "nb", "busy")
    busy_at = sim.world.clock.datetime().isoformat().replace("+00:00", "Z")
    sim.advance(1200)
    (model,) = get(core, "nb:8888", "api/kernels", token=token, no_track_activity="1")
    assert (model["execution_state"], model["last_activity"], model["name"]) == ("busy", busy_at, "python3")
    assert set(model) == {"id", "name", "last_activity", "execution_state", "connections"}
    status = get(core, "nb", "api/status", token=token)  # the first container port, 8888
    assert (status["kernels"], status["last_activity"]) == (1, busy_at)
    assert list(status) == sorted(status), "json.dumps(model, sort_keys=True)"

    kernel(sim, core, "nb", "idle")
    idle_at = sim.world.clock.datetime().isoformat().replace("+00:00", "Z")
    sim.advance(300)
    (model,) = get(core, "nb:8888", "api/kernels", token=token, no_track_activity="1")
    assert (model["execution_state"], model["last_activity"]) == ("idle", idle_at)
    assert get(core, "nb:8888", "api/status", token=token)["last_activity"] == idle_at

    get(core, "nb:8888", "api/kernels", token=token)  # an API request without no_track_activity
    now = sim.world.clock.datetime().isoformat().replace("+00:00", "Z")
    assert get(core, "nb:8888", "api/status", token=token)["last_activity"] == now
    kernel(sim, core, "nb", None)
    assert get(core, "nb:8888", "api/kernels", token=token) == []


def test_without_its_token_jupyter_forbids_and_other_paths_are_not_found(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    token = entrypoints.token(start(sim, core, "nb", NOTEBOOK_IMAGE))
    assert refused(lambda: get(core, "nb:8888", "api/status")) == (403, None, "Forbidden")
    assert refused(lambda: get(core, "nb:8888", "api/kernels", token="wrong"))[:2] == (403, None)
    with pytest.raises(ApiException) as missing:
        get(core, "nb:8888", "api/nothing", token=token)
    assert missing.value.status == 404


def test_the_proxy_refuses_as_the_apiserver_does(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    start(sim, core, "web", "nginx")
    ip = sim.world.store.get("pods", "default", "web")["status"]["podIP"]  # type: ignore[index]
    refusal = f"dial tcp {ip}:8888: connect: connection refused"
    assert refused(lambda: get(core, "web", "api/status")) == (500, "", refusal)
    start(sim, core, "nb", NOTEBOOK_IMAGE)
    nb_ip = sim.world.store.get("pods", "default", "nb")["status"]["podIP"]  # type: ignore[index]
    assert (
        refused(lambda: get(core, "nb:9999", "api/status"))[2]
        == f"dial tcp {nb_ip}:9999: connect: connection refused"
    )
    assert refused(lambda: get(core, "ghost:8888", "api/status")) == (
        404,
        "NotFound",
        'pods "ghost" not found',
    )
    assert refused(lambda: get(core, "a:b:c:d", "api/status")) == (
        400,
        "BadRequest",
        'invalid pod request "a:b:c:d"',
    )
    start(sim, core, "stuck", NOTEBOOK_IMAGE, node_selector={"nowhere": "x"})
    assert refused(lambda: get(core, "stuck:8888", "api/status")) == (
        400,
        "BadRequest",
        "address not allowed",
    )
