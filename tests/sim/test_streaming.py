"""`kubectl exec`, `attach` and `port-forward` against the embedded cluster, and a Jupyter image's log.

The sim runs no processes, so each answer is the real apiserver's for a kubelet that refuses the stream,
with its checks before that (no such pod or container, no node yet, no upgrade) in upstream's words.
"""

from __future__ import annotations

import json
import re
import urllib.request
from urllib.error import HTTPError

import pytest

from sim.cluster import entrypoints, world
from tests.sim.test_kubectl import TIMEOUT, Kubectl, wait_for_pod

REFUSED = re.compile(r"error dialing backend: dial tcp 10\.128\.\d+\.\d+:10250: connect: connection refused")


def pod(kubectl: Kubectl, name: str, image: str, *extra: str) -> None:
    kubectl.ok("run", name, f"--image={image}", "--restart=Never", *extra)


def running(sim: world.BackgroundWorld, name: str) -> None:
    sim.advance(60)
    wait_for_pod(sim, name, lambda p: p is not None and p["status"].get("phase") == "Running")


def test_exec_attach_and_port_forward_to_a_running_pod_meet_a_refusing_kubelet(
    sim: world.BackgroundWorld, kubectl: Kubectl
) -> None:
    pod(kubectl, "web", "nginx")
    running(sim, "web")
    for args in (("exec", "web", "--", "ls"), ("attach", "web"), ("exec", "-i", "web", "--", "sh")):
        done = kubectl.run(*args, stdin="")
        assert done.returncode == 1 and REFUSED.search(done.stderr), (args, done.stderr)
        assert "Error from server: error dialing backend" in done.stderr, "a Status with no reason"
    forward = kubectl.popen("port-forward", "pod/web", "18080:80")
    _, err = forward.communicate(timeout=TIMEOUT)
    assert forward.returncode == 1 and REFUSED.search(err), err


def test_a_pod_on_no_node_or_a_wrong_container_is_refused_before_any_kubelet(
    sim: world.BackgroundWorld, kubectl: Kubectl
) -> None:
    pod(kubectl, "stuck", "nginx", "--overrides", json.dumps({"spec": {"nodeSelector": {"nowhere": "x"}}}))
    assert (
        "Error from server (BadRequest): pod stuck does not have a host assigned"
        in kubectl.run("exec", "stuck", "--", "ls").stderr
    )
    pod(kubectl, "web", "nginx")
    running(sim, "web")
    wrong = kubectl.run("exec", "web", "-c", "nope", "--", "ls")
    assert "Error from server (BadRequest): container nope is not valid for pod web" in wrong.stderr
    missing = kubectl.run("exec", "ghost", "--", "ls")
    assert 'Error from server (NotFound): pods "ghost" not found' in missing.stderr


def test_a_request_without_an_upgrade_is_refused_as_upgrade_aware_proxies_do(
    sim: world.BackgroundWorld, kubectl: Kubectl
) -> None:
    pod(kubectl, "web", "nginx")
    running(sim, "web")
    request = urllib.request.Request(
        f"{sim.url}/api/v1/namespaces/default/pods/web/exec?command=ls", method="POST"
    )
    with pytest.raises(HTTPError) as raised:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    body = json.loads(raised.value.read())
    assert (raised.value.code, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        "Upgrade request required",
    )
    put = urllib.request.Request(f"{sim.url}/api/v1/namespaces/default/pods/web/portforward", method="PUT")
    with pytest.raises(HTTPError) as refused:
        urllib.request.urlopen(put, timeout=TIMEOUT)
    assert refused.value.code == 405


def test_discovery_lists_the_connect_subresources_as_the_real_server_does(kubectl: Kubectl) -> None:
    listed = {r["name"]: r for r in json.loads(kubectl.ok("get", "--raw", "/api/v1"))["resources"]}
    for sub, kind in (
        ("exec", "PodExecOptions"),
        ("attach", "PodAttachOptions"),
        ("portforward", "PodPortForwardOptions"),
    ):
        assert listed[f"pods/{sub}"]["kind"] == kind and listed[f"pods/{sub}"]["verbs"] == ["create", "get"]


def test_a_jupyter_image_prints_its_servers_url_with_a_token_fixed_by_the_pods_uid(
    sim: world.BackgroundWorld, kubectl: Kubectl
) -> None:
    pod(kubectl, "lab", "quay.io/jupyter/base-notebook:2024-10-07")
    running(sim, "lab")
    sim.advance(10)
    uid = kubectl.ok("get", "pod", "lab", "-o", "jsonpath={.metadata.uid}")
    log = kubectl.ok("logs", "lab").splitlines()
    token = entrypoints.token(uid)
    assert log[0] == "Entered start.sh with args: jupyter lab"
    assert any(
        re.fullmatch(
            r"\[I \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} ServerApp\] Jupyter Server 2\.14\.1 is running at:",
            line,
        )
        for line in log
    )
    assert f"        http://127.0.0.1:8888/lab?token={token}" in log
    assert f"        http://lab:8888/lab?token={token}" in log
    assert len(token) == 48 and int(token, 16) >= 0


@pytest.mark.parametrize(
    ("image", "jupyter"),
    [
        ("quay.io/jupyter/pytorch-notebook:cuda12-python-3.11", True),
        ("jupyter/scipy-notebook", True),
        ("jupyter/base-notebook@sha256:" + "0" * 64, True),
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", False),
        ("example.com/notjupyter/base-notebook", False),
        ("jupyter/repo2docker", False),
    ],
)
def test_which_images_are_jupyter_servers(image: str, jupyter: bool) -> None:
    assert entrypoints.is_jupyter(image) is jupyter
