"""The simulated Prometheus over plain HTTP: DCGM series driven by what pods do, faults, and bad queries."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from sim.cluster import world
from tests.sim.test_scenarios import advance_until, gpu_pod, pod

NS = "gpubot"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
ANNOTATION = "sim.gpubot.dev/gpu-util"
LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Proxy variables must not reroute loopback requests."""


def http(
    sim: world.BackgroundWorld, path: str, *, form: dict[str, str] | None = None, body: Any = None
) -> Any:
    """GET with `form` as the query string, or POST it form-encoded, or POST `body` as JSON."""
    encoded = urllib.parse.urlencode(form or {})
    if body is not None:
        request = urllib.request.Request(
            sim.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
    else:
        request = urllib.request.Request(f"{sim.url}{path}?{encoded}")
    try:
        with LOOPBACK.open(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def query(sim: world.BackgroundWorld, promql: str, **params: str) -> list[dict[str, Any]]:
    status, answer = http(sim, "/api/v1/query", form={"query": promql, **params})
    assert (status, answer["status"]) == (200, "success"), answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def by_pod(result: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {series["metric"]["pod"]: series for series in result}


def sim_time(sim: world.BackgroundWorld) -> float:
    """Unix seconds of the simulated clock, as Prometheus timestamps are."""
    _, clock = http(sim, "/simctl/v1/clock")
    return datetime.fromisoformat(clock["time"]).timestamp()


def started_at(core: client.CoreV1Api, name: str) -> float:
    running = core.read_namespaced_pod(name, NS).status.container_statuses[0].state.running
    return float(running.started_at.timestamp())


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    """The shared fixture's client, with the bot's namespace created."""
    api = client.CoreV1Api(api_client)
    api.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return api


def run_gpu_pods(sim: world.BackgroundWorld, core: client.CoreV1Api, **commands: list[str]) -> None:
    for name, command in commands.items():
        core.create_namespaced_pod(NS, gpu_pod(name, command=command))

    def all_running() -> bool:
        return all(p["status"].get("phase") == "Running" for p in sim.pods(NS))

    advance_until(sim, all_running, limit=1200, step=15)


TRAIN, NOTEBOOK = ["python", "train.py"], ["sleep", "infinity"]


def test_busy_and_sleeping_gpu_pods_have_dcgm_series_with_pod_attribution(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod("cpu-only", command=["python", "serve.py"]))
    run_gpu_pods(sim, core, train=TRAIN, notebook=NOTEBOOK)
    at = sim_time(sim)

    util = by_pod(query(sim, f'{UTIL}{{namespace="{NS}"}}', time=str(at)))
    ratio = by_pod(query(sim, f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{namespace="{NS}"}}'))

    assert set(util) == {"train", "notebook"}, "only running pods holding a GPU have a series"
    assert util["train"]["value"] == [at, "97"]
    assert util["notebook"]["value"] == [at, "0"]
    assert (ratio["train"]["value"][1], ratio["notebook"]["value"][1]) == ("0.97", "0")
    labels = util["train"]["metric"]
    node = core.read_namespaced_pod("train", NS).spec.node_name
    assert labels | {"UUID": "?"} == {
        "__name__": UTIL,
        "gpu": "0",
        "UUID": "?",
        "pci_bus_id": "00000000:00:04.0",
        "device": "nvidia0",
        "modelName": "Tesla T4",
        "Hostname": node,
        "container": "main",
        "namespace": NS,
        "pod": "train",
        "instance": labels["instance"],
        "job": "nvidia-dcgm-exporter",
    }
    assert labels["UUID"].startswith("GPU-") and labels["UUID"] != util["notebook"]["metric"]["UUID"]


def test_label_matchers_select_like_prometheus(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    run_gpu_pods(sim, core, train=TRAIN, notebook=NOTEBOOK)

    def pods_of(selector: str) -> set[str]:
        return set(by_pod(query(sim, f"{UTIL}{{{selector}}}")))

    assert pods_of(f'namespace="{NS}",pod=~"train|note.*"') == {"train", "notebook"}
    assert pods_of('pod!="train"') == {"notebook"}
    assert pods_of('pod!~"t.*"') == {"notebook"}
    assert pods_of('pod=~"trai"') == set(), "regular expressions are anchored"
    assert pods_of('namespace="elsewhere"') == set()
    assert set(by_pod(query(sim, f'{{__name__="{UTIL}",pod="train"}}'))) == {"train"}


def test_samples_follow_the_scrape_interval_from_the_container_start(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, core, train=TRAIN)
    start = started_at(core, "train")
    sim.advance(600)

    (series,) = query(sim, f'{UTIL}{{pod="train"}}[1h]')
    times = [t for t, _ in series["values"]]

    assert start <= times[0] < start + 15
    assert {b - a for a, b in itertools.pairwise(times)} == {15}
    assert times[-1] <= sim_time(sim) < times[-1] + 15
    assert {v for _, v in series["values"]} == {"97"}
    assert query(sim, f'{UTIL}{{pod="train"}}', time=str(start - 1)) == [], "nothing before it ran"


def test_query_range_reads_the_past_after_a_clock_jump(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, core, train=TRAIN)
    start = started_at(core, "train") + 60
    sim.advance(3600, step=3600)
    end = sim_time(sim)

    status, answer = http(
        sim,
        "/api/v1/query_range",
        form={"query": f'{UTIL}{{pod="train"}}', "start": str(start), "end": str(end), "step": "5m"},
    )

    assert status == 200 and answer["data"]["resultType"] == "matrix"
    (series,) = answer["data"]["result"]
    assert [t for t, _ in series["values"]] == [start + k * 300 for k in range(int((end - start) // 300) + 1)]
    assert {v for _, v in series["values"]} == {"97"}


def test_the_annotation_flips_a_pod_from_the_moment_it_is_set(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, core, train=TRAIN, notebook=NOTEBOOK)
    sim.advance(600)
    flipped = sim_time(sim)
    core.patch_namespaced_pod("train", NS, {"metadata": {"annotations": {ANNOTATION: "0"}}})
    core.patch_namespaced_pod("notebook", NS, {"metadata": {"annotations": {ANNOTATION: "55"}}})
    sim.advance(600)

    def value(promql: str, **params: str) -> str:
        (series,) = query(sim, promql, **params)
        return str(series["value"][1])

    assert value(f'max_over_time({UTIL}{{pod="train"}}[5m])') == "0"
    assert value(f'max_over_time({UTIL}{{pod="train"}}[15m])') == "97", "the past keeps its values"
    assert value(f'{UTIL}{{pod="train"}}', time=str(flipped - 30)) == "97"
    assert 0 < float(value(f'avg_over_time({UTIL}{{pod="train"}}[20m])')) < 97
    assert value(f'{UTIL}{{pod="notebook"}}') == "55"

    core.patch_namespaced_pod("train", NS, {"metadata": {"annotations": {ANNOTATION: None}}})
    sim.advance(15)
    assert value(f'{UTIL}{{pod="train"}}') == "97", "without the annotation the command decides again"


def test_a_missing_fault_hides_a_pods_series_until_healed(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, core, train=TRAIN, notebook=NOTEBOOK)
    sim.advance(300)

    assert http(sim, "/simctl/v1/faults", body={"pod": f"{NS}/train", "kind": "metrics_missing"})[0] == 200
    assert set(by_pod(query(sim, f'{UTIL}{{namespace="{NS}"}}[10m]'))) == {"notebook"}
    assert set(by_pod(query(sim, f'max_over_time({UTIL}{{namespace="{NS}"}}[10m])'))) == {"notebook"}

    assert http(sim, "/simctl/v1/faults", body={"pod": f"{NS}/train", "kind": None})[0] == 200
    healed = by_pod(query(sim, f'{UTIL}{{namespace="{NS}"}}[10m]'))
    assert set(healed) == {"train", "notebook"}
    assert len(healed["train"]["values"]) > 1, "healing brings the history back"


def test_a_stale_fault_stops_a_pods_samples_at_the_given_time(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, core, train=TRAIN, notebook=NOTEBOOK)
    sim.advance(300)
    _, clock = http(sim, "/simctl/v1/clock")
    cutoff = sim_time(sim)
    fault = {"pod": f"{NS}/train", "kind": "metrics_stale", "after": clock["now"]}
    assert http(sim, "/simctl/v1/faults", body=fault)[0] == 200
    sim.advance(600)
    now = sim_time(sim)

    raw = by_pod(query(sim, f'{UTIL}{{namespace="{NS}"}}[30m]'))
    assert cutoff - 15 < raw["train"]["values"][-1][0] <= cutoff
    assert raw["notebook"]["values"][-1][0] > now - 15
    assert set(by_pod(query(sim, f'{UTIL}{{namespace="{NS}"}}'))) == {"notebook"}, "marked stale"
    peak = by_pod(query(sim, f'max_over_time({UTIL}{{namespace="{NS}"}}[30m])'))
    assert peak["train"]["value"][1] == "97", "what was scraped before the cutoff stays queryable"


def test_post_form_bodies_are_read_like_query_strings(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run_gpu_pods(sim, core, train=TRAIN)
    at = str(sim_time(sim))
    form = urllib.parse.urlencode({"query": f'{UTIL}{{pod="train"}}', "time": at}).encode()
    request = urllib.request.Request(f"{sim.url}/api/v1/query", data=form)

    with LOOPBACK.open(request, timeout=10) as response:
        posted = json.load(response)

    assert posted["data"]["result"] == query(sim, f'{UTIL}{{pod="train"}}', time=at)
    assert posted["data"]["result"][0]["value"][1] == "97"


@pytest.mark.parametrize(
    ("path", "form", "error"),
    [
        ("/api/v1/query", {"query": f"rate({UTIL}[5m])"}, "unsupported by the simulated Prometheus"),
        ("/api/v1/query", {"query": f"sum({UTIL})"}, "unsupported by the simulated Prometheus"),
        ("/api/v1/query", {}, 'invalid parameter "query": 1:1: parse error: no expression found'),
        ("/api/v1/query", {"query": f"max_over_time({UTIL})"}, "expected type range vector"),
        ("/api/v1/query", {"query": f'{UTIL}{{pod=~"("}}'}, "error parsing regexp"),
        ("/api/v1/query", {"query": '{pod=""}'}, "at least one non-empty matcher"),
        ("/api/v1/query", {"query": f"{UTIL}[5x]"}, 'not a valid duration string: "5x"'),
        ("/api/v1/query", {"query": UTIL, "time": "yesterday"}, 'invalid parameter "time": cannot parse'),
        ("/api/v1/query_range", {"query": UTIL, "end": "10", "step": "15"}, 'invalid parameter "start"'),
        (
            "/api/v1/query_range",
            {"query": UTIL, "start": "20", "end": "10", "step": "15"},
            "end timestamp must not be before start time",
        ),
        (
            "/api/v1/query_range",
            {"query": UTIL, "start": "0", "end": "10", "step": "0"},
            'invalid parameter "step": zero or negative query resolution step widths are not accepted',
        ),
        (
            "/api/v1/query_range",
            {"query": f"{UTIL}[5m]", "start": "0", "end": "10", "step": "15"},
            'invalid expression type "range vector" for range query',
        ),
        (
            "/api/v1/query_range",
            {"query": UTIL, "start": "0", "end": "86400", "step": "1"},
            "exceeded maximum resolution of 11,000 points per timeseries",
        ),
    ],
)
def test_unsupported_or_malformed_queries_answer_bad_data(
    sim: world.BackgroundWorld, path: str, form: dict[str, str], error: str
) -> None:
    status, answer = http(sim, path, form=form)

    assert status == 400
    assert (answer["status"], answer["errorType"]) == ("error", "bad_data")
    assert error in answer["error"]


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"pod": "train", "kind": "metrics_missing"}, '"namespace/name"'),
        ({"pod": f"{NS}/train", "kind": "melted"}, "unknown pod fault 'melted'"),
        ({"pod": f"{NS}/train", "kind": "metrics_stale", "after": "soon"}, "soon"),
    ],
)
def test_pod_faults_are_checked(sim: world.BackgroundWorld, fault: dict[str, Any], error: str) -> None:
    status, answer = http(sim, "/simctl/v1/faults", body=fault)

    assert status == 400 and error in answer["error"]


def test_pool_faults_still_work_next_to_pod_faults(sim: world.BackgroundWorld) -> None:
    status, _ = http(sim, "/simctl/v1/faults", body={"pool": "gpu-pool", "kind": "stockout"})

    assert status == 200
    assert sim.run(lambda: set(sim.world.faults.stockout)) == {"gpu-pool"}
