"""The Jupyter reader (`bot/adapters/jupyter.py`) against the sim's pod proxy, with the real client: a
notebook's activity read with its token, and each reason it cannot be, in its owner's words."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from bot.adapters import jupyter as jupyter_adapter
from bot.core import notebooks
from sim.cluster import entrypoints, jupyter, world
from tests.sim import rbackit
from tests.sim.test_pod_proxy import NOTEBOOK_IMAGE, start


@pytest.fixture
def core(sim: world.BackgroundWorld) -> Iterator[client.CoreV1Api]:
    with client.ApiClient(client.Configuration(host=sim.url)) as api:
        yield client.CoreV1Api(api)


def test_a_notebooks_kernels_are_read_through_the_proxy_and_reading_them_is_no_activity(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    reader = jupyter_adapter.JupyterReader(core.api_client)
    token = entrypoints.token(start(sim, core, "nb", NOTEBOOK_IMAGE))
    sim.advance(600)
    patch = {"metadata": {"annotations": {jupyter.KERNEL_ANNOTATION: "busy"}}}
    core.patch_namespaced_pod("nb", "default", patch)
    busy_at = sim.world.clock.datetime()
    sim.advance(1800)
    first = reader.jupyter_activity("default", "nb", port=8888, token=token)
    assert first == notebooks.Activity(busy_at, busy_kernels=1)
    assert reader.jupyter_activity("default", "nb", port=8888, token=token) == first, "read, not touched"
    assert core.api_client.configuration.safe_chars_for_path_param == "", "the bot's own client is unchanged"


def test_each_reason_a_notebook_cannot_be_read_is_said_plainly(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    reader = jupyter_adapter.JupyterReader(core.api_client)
    start(sim, core, "nb", NOTEBOOK_IMAGE)
    start(sim, core, "web", "nginx")
    assert reader.jupyter_activity("default", "nb", port=8888, token="stale") == notebooks.Unread(
        "its Jupyter refused the token gpubot read from its log"
    )
    assert reader.jupyter_activity("default", "web", port=8888, token="t") == notebooks.Unread(
        "the API server could not reach its Jupyter"
    )
    assert reader.jupyter_activity("default", "gone", port=8888, token="t") == notebooks.Unread(
        "its Jupyter could not be read (HTTP 404)"
    )


def test_a_role_without_pods_proxy_is_named_as_the_reason(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    token = entrypoints.token(start(sim, core, "nb", NOTEBOOK_IMAGE))
    account = rbackit.service_account_token(core.api_client, "default", "no-proxy")
    with rbackit.token_client(sim, account) as api:
        reader = jupyter_adapter.JupyterReader(api)
        assert reader.jupyter_activity("default", "nb", port=8888, token=token) == notebooks.Unread(
            "gpubot may not use the pod proxy (its Role lacks pods/proxy get)"
        )
