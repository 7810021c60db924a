"""The Prometheus adapter against the sim's query API, and against a Prometheus that misbehaves."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import urllib3
from aiohttp import web
from kubernetes import client

from bot.adapters import metrics
from bot.core import errors, idleness
from sim.cluster import world
from tests.sim import routes_server
from tests.sim.test_scenarios import advance_until, gpu_pod

NS = "gpubot"
WINDOW = timedelta(minutes=30)
SCRAPE = timedelta(seconds=15)
TRAIN, NOTEBOOK = ["python", "train.py"], ["sleep", "infinity"]


@pytest.fixture
def prometheus(sim: world.BackgroundWorld) -> Iterator[metrics.PrometheusMetrics]:
    adapter = metrics.PrometheusMetrics(sim.url)
    yield adapter
    adapter.close()


@pytest.fixture
def gpubot_core(core: client.CoreV1Api) -> client.CoreV1Api:
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return core


def run_gpu_pods(sim: world.BackgroundWorld, core: client.CoreV1Api, **commands: list[str]) -> None:
    for name, command in commands.items():
        core.create_namespaced_pod(NS, gpu_pod(name, command=command))

    def all_running() -> bool:
        return all(p["status"].get("phase") == "Running" for p in sim.pods(NS))

    advance_until(sim, all_running, limit=1200, step=15)


def sim_now(sim: world.BackgroundWorld) -> datetime:
    return sim.run(sim.world.clock.datetime)


def set_pod_fault(sim: world.BackgroundWorld, pod: str, kind: str | None) -> None:
    answer = urllib3.request("POST", f"{sim.url}/simctl/v1/faults", json={"pod": f"{NS}/{pod}", "kind": kind})
    assert answer.status == 200, answer.data


def idle(utilisation: idleness.Utilisation | None, now: datetime) -> bool:
    return idleness.is_idle(
        utilisation, threshold_percent=5.0, window=WINDOW, scrape_interval=SCRAPE, now=now
    )


def test_a_sleeping_pod_reads_idle_and_a_training_pod_busy(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api, prometheus: metrics.PrometheusMetrics
) -> None:
    run_gpu_pods(sim, gpubot_core, train=TRAIN, notebook=NOTEBOOK)
    sim.advance(WINDOW.total_seconds() + 300)
    now = sim_now(sim)

    seen = prometheus.gpu_utilisation(NS, ["train", "notebook"], window=WINDOW, at=now)

    assert set(seen) == {"train", "notebook"}
    assert (seen["notebook"].max_percent, seen["train"].max_percent) == (0.0, 97.0)
    assert seen["notebook"].samples == WINDOW / SCRAPE
    assert now - SCRAPE < seen["notebook"].newest <= now
    assert idle(seen["notebook"], now) and not idle(seen["train"], now)


def test_the_engine_active_ratio_is_scaled_to_percent(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, gpubot_core, train=TRAIN)
    ratio = metrics.PrometheusMetrics(sim.url, metric=metrics.GR_ENGINE_ACTIVE)

    seen = ratio.gpu_utilisation(NS, ["train"], window=WINDOW, at=sim_now(sim))
    ratio.close()

    assert seen["train"].max_percent == pytest.approx(97.0)


def test_a_pod_younger_than_the_window_is_not_idle_yet(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api, prometheus: metrics.PrometheusMetrics
) -> None:
    run_gpu_pods(sim, gpubot_core, notebook=NOTEBOOK)
    sim.advance(300)
    now = sim_now(sim)

    seen = prometheus.gpu_utilisation(NS, ["notebook"], window=WINDOW, at=now)

    assert seen["notebook"].max_percent == 0.0 and seen["notebook"].samples < WINDOW / SCRAPE / 2
    assert not idle(seen["notebook"], now)


def test_turning_idle_shows_only_once_a_whole_window_has_passed(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api, prometheus: metrics.PrometheusMetrics
) -> None:
    run_gpu_pods(sim, gpubot_core, train=TRAIN)
    sim.advance(WINDOW.total_seconds())
    annotation = {"metadata": {"annotations": {"sim.gpubot.dev/gpu-util": "0"}}}
    gpubot_core.patch_namespaced_pod("train", NS, annotation)

    def idle_now() -> bool:
        now = sim_now(sim)
        return idle(prometheus.gpu_utilisation(NS, ["train"], window=WINDOW, at=now).get("train"), now)

    sim.advance(WINDOW.total_seconds() - 60)
    assert not idle_now(), "the busy start of the window still counts"
    sim.advance(60)
    assert idle_now()


def test_a_pod_without_metrics_is_absent(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api, prometheus: metrics.PrometheusMetrics
) -> None:
    run_gpu_pods(sim, gpubot_core, train=TRAIN, notebook=NOTEBOOK)
    sim.advance(WINDOW.total_seconds())
    set_pod_fault(sim, "notebook", "metrics_missing")
    now = sim_now(sim)

    seen = prometheus.gpu_utilisation(NS, ["train", "notebook", "ghost"], window=WINDOW, at=now)

    assert set(seen) == {"train"}
    assert not idle(seen.get("notebook"), now)


def test_a_stale_pod_is_present_but_not_idle(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api, prometheus: metrics.PrometheusMetrics
) -> None:
    run_gpu_pods(sim, gpubot_core, notebook=NOTEBOOK)
    sim.advance(WINDOW.total_seconds())
    cutoff = sim_now(sim)
    set_pod_fault(sim, "notebook", "metrics_stale")
    sim.advance(300)
    now = sim_now(sim)

    seen = prometheus.gpu_utilisation(NS, ["notebook"], window=WINDOW, at=now)

    assert cutoff - SCRAPE < seen["notebook"].newest <= cutoff
    assert seen["notebook"].max_percent == 0.0
    assert not idle(seen["notebook"], now)


def test_pod_names_are_matched_exactly(
    sim: world.BackgroundWorld, gpubot_core: client.CoreV1Api, prometheus: metrics.PrometheusMetrics
) -> None:
    run_gpu_pods(sim, gpubot_core, **{"nb.v2": NOTEBOOK, "nbxv2": TRAIN, "nb.v2-b": TRAIN})

    seen = prometheus.gpu_utilisation(NS, ["nb.v2"], window=WINDOW, at=sim_now(sim))

    assert set(seen) == {"nb.v2"}, "a dot is not a wildcard and the match is anchored"
    assert metrics.range_query(metrics.GPU_UTIL, NS, ["b", "a.c"], timedelta(minutes=45)) == (
        'DCGM_FI_DEV_GPU_UTIL{namespace="gpubot",pod=~"a\\\\.c|b"}[2700s]'
    )


def test_bad_arguments_are_refused_before_any_request(closed_url: str) -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="metric must be one of"):
        metrics.PrometheusMetrics(closed_url, metric="DCGM_FI_DEV_FB_USED")
    with pytest.raises(ValueError, match="http:// or https://"):
        metrics.PrometheusMetrics("prometheus:9090")
    adapter = metrics.PrometheusMetrics(closed_url)
    with pytest.raises(ValueError, match="timezone-aware"):
        adapter.gpu_utilisation(NS, ["a"], window=WINDOW, at=datetime(2026, 3, 1))
    with pytest.raises(ValueError, match="window must be positive"):
        adapter.gpu_utilisation(NS, ["a"], window=timedelta(0), at=at)
    assert adapter.gpu_utilisation(NS, [], window=WINDOW, at=at) == {}


# -- a Prometheus that misbehaves ------------------------------------------------------------
@pytest.fixture
def closed_url() -> str:
    """A loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def answering(status: int, body: str, headers: dict[str, str] | None = None) -> list[web.RouteDef]:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body, headers=headers, content_type="application/json")

    return [web.post("/api/v1/query", handler)]


MATRIX_OF_NOTHING = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})
VECTOR = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
BAD_DATA = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})
TIMEOUT = json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out"})
AT = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("routes", "raised", "message"),
    [
        pytest.param(answering(503, TIMEOUT), errors.Unavailable, "query timed out", id="5xx"),
        pytest.param(answering(502, "<html>bad gateway</html>"), errors.Unavailable, "502", id="proxy-5xx"),
        pytest.param(answering(200, "not json"), errors.Unavailable, "unexpected answer", id="bad-json"),
        pytest.param(answering(200, VECTOR), errors.Unavailable, "expected 'matrix'", id="wrong-shape"),
        pytest.param(answering(400, BAD_DATA), errors.Invalid, "parse error", id="bad-data"),
        pytest.param(answering(404, "404 page not found"), errors.Invalid, "404", id="wrong-url"),
        pytest.param(
            answering(429, "{}", {"Retry-After": "7"}), errors.RateLimited, "rate limited", id="throttled"
        ),
    ],
)
def test_remote_failures_become_the_error_taxonomy(
    routes: list[web.RouteDef], raised: type[errors.GpubotError], message: str
) -> None:
    with routes_server.serve(routes) as url, pytest.raises(raised, match=message) as caught:
        metrics.PrometheusMetrics(url).gpu_utilisation(NS, ["a"], window=WINDOW, at=AT)

    if isinstance(caught.value, errors.RateLimited):
        assert caught.value.retry_after == 7.0


def test_an_empty_answer_means_no_pod_is_known() -> None:
    with routes_server.serve(answering(200, MATRIX_OF_NOTHING)) as url:
        assert metrics.PrometheusMetrics(url).gpu_utilisation(NS, ["a"], window=WINDOW, at=AT) == {}


def test_an_unreachable_prometheus_is_unavailable(closed_url: str) -> None:
    with pytest.raises(errors.Unavailable, match="did not answer"):
        metrics.PrometheusMetrics(closed_url).gpu_utilisation(NS, ["a"], window=WINDOW, at=AT)


def test_a_prometheus_that_hangs_is_unavailable_after_the_timeout() -> None:
    released = threading.Event()

    async def hang(request: web.Request) -> web.Response:
        await asyncio.get_running_loop().run_in_executor(None, released.wait)
        return web.Response(text=MATRIX_OF_NOTHING)

    with routes_server.serve([web.post("/api/v1/query", hang)]) as url:
        try:
            with pytest.raises(errors.Unavailable, match="did not answer"):
                metrics.PrometheusMetrics(url, timeout=0.2).gpu_utilisation(NS, ["a"], window=WINDOW, at=AT)
        finally:
            released.set()


def basic_auth_only(expected: str) -> list[web.RouteDef]:
    """A Prometheus behind basic auth (a reverse proxy, Grafana Cloud): 401 without the right header."""

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, text='{"status":"error","error":"unauthorized"}')
        return web.Response(text=MATRIX_OF_NOTHING, content_type="application/json")

    return [web.post("/api/v1/query", handler)]


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 21: the URL's password was logged at start-up; urllib3 also drops a URL's userinfo, so the
    credentials never reached Prometheus either."""
    expected = urllib3.make_headers(basic_auth="gpu:s3cr@t")["authorization"]
    with routes_server.serve(basic_auth_only(expected)) as url:
        with_password = url.replace("http://", "http://gpu:s3cr%40t@")
        caplog.set_level("DEBUG")
        assert metrics.PrometheusMetrics(with_password).gpu_utilisation(NS, ["a"], window=WINDOW, at=AT) == {}
        wrong = url.replace("http://", "http://gpu:wrong-one@")
        with pytest.raises(errors.Invalid, match="refused the query \\(401\\)") as refused:
            metrics.PrometheusMetrics(wrong).gpu_utilisation(NS, ["a"], window=WINDOW, at=AT)
    assert "wrong-one" not in str(refused.value) and url in str(refused.value)
    assert "s3cr" not in caplog.text and "wrong-one" not in caplog.text
