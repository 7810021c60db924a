"""Container logs via the official client: what commands print, served as the apiserver serves pods/log."""

from __future__ import annotations

import datetime
import json
import queue
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.cluster import world
from tests.sim.test_scenarios import advance_until, pod, reasons

NS = "default"
WAIT = 30.0
"""Real seconds a follow may take to deliver a line the clock already printed."""
STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)")


def script(name: str, text: str, *, restart: str = "Never", **extra: Any) -> dict[str, Any]:
    body = pod(name, command=["sh", "-c", text], restart=restart)
    body["spec"]["containers"][0].update(extra)
    return body


def phase(core: client.CoreV1Api, name: str) -> str:
    return str(core.read_namespaced_pod(name, NS).status.phase)


def status(core: client.CoreV1Api, name: str) -> Any:
    return core.read_namespaced_pod(name, NS).status.container_statuses[0]


def run(sim: world.BackgroundWorld, core: client.CoreV1Api, body: dict[str, Any]) -> None:
    """Create the pod and move the clock until its container is running (pull and start take 2 s)."""
    core.create_namespaced_pod(NS, body)
    name = body["metadata"]["name"]
    advance_until(sim, lambda: phase(core, name) != "Pending", limit=30, step=1)


def failure(err: ApiException) -> tuple[int, str, str]:
    body = json.loads(err.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    return err.status, body["reason"], body["message"]


def log_error(core: client.CoreV1Api, name: str, **kwargs: Any) -> tuple[int, str, str]:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log(name, NS, **kwargs)
    return failure(caught.value)


def raw_log(sim: world.BackgroundWorld, name: str, query: str) -> tuple[int, dict[str, Any] | str, str]:
    """A query the client would not send as typed: (status, Status body or text, content type)."""
    url = f"{sim.url}/api/v1/namespaces/{NS}/pods/{name}/log?{query}"
    try:
        with urllib.request.urlopen(url) as response:
            return response.status, response.read().decode(), response.headers["Content-Type"]
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers["Content-Type"]


def stamped(text: str) -> list[tuple[datetime.datetime, str]]:
    out = []
    for line in text.splitlines():
        match = STAMP.fullmatch(line)
        assert match, f"not an RFC3339NanoFixed prefix: {line!r}"
        moment = datetime.datetime.fromisoformat(match.group(1)[:26] + "+00:00")
        out.append((moment, match.group(2)))
    return out


# -- reading --------------------------------------------------------------------------------------


def test_the_log_is_what_the_command_printed_on_both_streams(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    text = "echo hello; echo 'to; stderr' >&2; printf '%s-%d\\n' a 1 b 2; echo -n tail"
    run(sim, core, script("printer", text))
    advance_until(sim, lambda: phase(core, "printer") == "Succeeded", limit=10, step=1)
    assert core.read_namespaced_pod_log("printer", NS) == "hello\nto; stderr\na-1\nb-2\ntail"
    assert core.read_namespaced_pod_log("printer", NS, container="main") == (
        "hello\nto; stderr\na-1\nb-2\ntail"
    )


def test_tail_lines_and_timestamps_follow_the_clock(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run(sim, core, script("ticker", "echo one; sleep 5; echo two; sleep 5; echo three; sleep 3600"))
    sim.advance(11)
    assert core.read_namespaced_pod_log("ticker", NS) == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("ticker", NS, tail_lines=2) == "two\nthree\n"
    assert core.read_namespaced_pod_log("ticker", NS, tail_lines=0) == ""
    lines = stamped(core.read_namespaced_pod_log("ticker", NS, timestamps=True))
    assert [text for _, text in lines] == ["one", "two", "three"]
    started = status(core, "ticker").state.running.started_at
    assert [(moment - started).total_seconds() for moment, _ in lines] == [0.0, 5.0, 10.0]


def test_since_seconds_since_time_and_limit_bytes(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    run(sim, core, script("ticker", "echo one; sleep 5; echo two; sleep 5; echo three; sleep 3600"))
    sim.advance(11)
    assert core.read_namespaced_pod_log("ticker", NS, since_seconds=6) == "two\nthree\n"
    assert core.read_namespaced_pod_log("ticker", NS, since_seconds=5) == "three\n"
    assert core.read_namespaced_pod_log("ticker", NS, limit_bytes=6) == "one\ntw"
    started = status(core, "ticker").state.running.started_at
    since = (started + datetime.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, text, content_type = raw_log(sim, "ticker", f"sinceTime={since}")
    assert (code, text, content_type) == (200, "two\nthree\n", "text/plain")


def test_a_pod_on_a_node_that_is_gone_answers_the_nodes_not_found(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    body = script("stranded", "echo hi")
    body["spec"]["nodeName"] = "gke-demo-gone-node"
    core.create_namespaced_pod(NS, body)
    assert log_error(core, "stranded") == (404, "NotFound", 'nodes "gke-demo-gone-node" not found')


def test_a_pod_on_no_node_has_no_content(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    body = script("unscheduled", "echo never")
    body["spec"]["schedulerName"] = "manual-scheduler"
    core.create_namespaced_pod(NS, body)
    assert raw_log(sim, "unscheduled", "")[0] == 204
    assert core.read_namespaced_pod_log("unscheduled", NS) is None, "the client reads no body as None"


# -- follow and previous ------------------------------------------------------------------------------


def follow(core: client.CoreV1Api, name: str, **kwargs: Any) -> queue.Queue[str | None]:
    """Stream the log on a thread (`_preload_content=False`): chunks arrive on the queue, None at the end."""
    response = core.read_namespaced_pod_log(name, NS, follow=True, _preload_content=False, **kwargs)
    chunks: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for chunk in response.stream(1024):
            chunks.put(chunk.decode())
        chunks.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return chunks


def read_until(chunks: queue.Queue[str | None], expected: str) -> str:
    seen = ""
    while expected not in seen:
        chunk = chunks.get(timeout=WAIT)
        assert chunk is not None, f"the stream ended after {seen!r}, before {expected!r}"
        seen += chunk
    return seen


def test_follow_streams_lines_as_the_clock_prints_them_and_ends_with_the_container(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run(sim, core, script("slow", "echo first; sleep 10; echo second; sleep 10; echo third"))
    chunks = follow(core, "slow")
    assert read_until(chunks, "first\n") == "first\n"
    assert chunks.empty(), "nothing more until the clock moves"
    sim.advance(10)
    assert read_until(chunks, "second\n") == "second\n"
    sim.advance(10)
    assert read_until(chunks, "third\n") == "third\n"
    assert chunks.get(timeout=WAIT) is None, "the stream ends when the container exits"
    assert phase(core, "slow") == "Succeeded"


def test_follow_with_tail_and_timestamps_of_a_running_container(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run(sim, core, script("ticker", "echo one; echo two; sleep 5; echo three; sleep 3600"))
    chunks = follow(core, "ticker", tail_lines=1, timestamps=True)
    assert [text for _, text in stamped(read_until(chunks, "two\n"))] == ["two"]
    sim.advance(5)
    [(moment, text)] = stamped(read_until(chunks, "three\n"))
    started = status(core, "ticker").state.running.started_at
    assert (text, (moment - started).total_seconds()) == ("three", 5.0)
    core.delete_namespaced_pod("ticker", NS, grace_period_seconds=0)
    sim.advance(1)
    assert chunks.get(timeout=WAIT) is None, "the stream ends when the pod goes"


def test_previous_reads_the_instance_before_a_restart(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run(sim, core, script("crasher", "echo attempt; sleep 5; echo failing >&2; exit 3", restart="Always"))
    assert log_error(core, "crasher", previous=True) == (
        400,
        "BadRequest",
        'previous terminated container "main" in pod "crasher" not found',
    )
    advance_until(sim, lambda: status(core, "crasher").restart_count == 1, limit=30, step=1)
    current, previous = status(core, "crasher"), status(core, "crasher").last_state.terminated
    assert (previous.exit_code, previous.reason) == (3, "Error")
    assert previous.container_id and previous.container_id != current.container_id
    [(first, _), (last, _)] = stamped(
        core.read_namespaced_pod_log("crasher", NS, previous=True, timestamps=True)
    )
    assert (first, last) == (previous.started_at, previous.started_at + datetime.timedelta(seconds=5))
    assert core.read_namespaced_pod_log("crasher", NS, previous=True) == "attempt\nfailing\n"
    [(started, text)] = stamped(core.read_namespaced_pod_log("crasher", NS, timestamps=True))
    assert (started, text) == (current.state.running.started_at, "attempt")


def test_a_crash_looping_container_shows_its_last_run(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run(sim, core, script("looper", "echo try; exit 1", restart="Always"))
    advance_until(
        sim,
        lambda: (
            (status(core, "looper").state.waiting or client.V1ContainerStateWaiting()).reason
            == "CrashLoopBackOff"
        ),
        limit=60,
        step=1,
    )
    assert core.read_namespaced_pod_log("looper", NS) == "try\n", "waiting: the last terminated instance"
    assert core.read_namespaced_pod_log("looper", NS, follow=True) == "try\n", "follow ends at once"


# -- out of memory -------------------------------------------------------------------------------


def test_memory_past_the_limit_is_an_oom_kill(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    limits = {"resources": {"limits": {"memory": "64Mi"}}}
    run(sim, core, script("hungry", "echo start; tail /dev/zero", **limits))
    advance_until(sim, lambda: phase(core, "hungry") == "Failed", limit=5, step=1)
    terminated = status(core, "hungry").state.terminated
    assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)
    assert terminated.container_id == status(core, "hungry").container_id
    assert core.read_namespaced_pod_log("hungry", NS) == "start\n"
    assert reasons(core, "hungry") == ["Scheduled", "Pulling", "Pulled", "Created", "Started"], (
        "the kubelet records no event of its own for a container's OOM kill"
    )
    conditions = {c.type: c for c in core.read_namespaced_pod("hungry", NS).status.conditions}
    for kind in ("Ready", "ContainersReady"):
        assert (conditions[kind].status, conditions[kind].reason) == ("False", "PodFailed")


def test_an_oom_killed_container_that_restarts_backs_off(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    limits = {"resources": {"limits": {"memory": "64Mi"}}}
    run(sim, core, script("hungry", "echo start; tail /dev/zero", restart="Always", **limits))
    advance_until(sim, lambda: status(core, "hungry").restart_count >= 2, limit=60, step=1)
    last = status(core, "hungry").last_state.terminated
    assert (last.reason, last.exit_code) == ("OOMKilled", 137)
    assert "BackOff" in reasons(core, "hungry")
    assert core.read_namespaced_pod_log("hungry", NS, previous=True) == "start\n"


def test_without_a_limit_growth_is_bounded_by_the_node(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    run(sim, core, script("unbounded", "tail /dev/zero"))
    sim.advance(5)
    assert phase(core, "unbounded") == "Running", "an e2-standard-4 can allocate about 14.5 GiB"
    advance_until(sim, lambda: phase(core, "unbounded") == "Failed", limit=20, step=1)
    assert status(core, "unbounded").state.terminated.reason == "OOMKilled"


def test_bounded_growth_under_the_limit_keeps_running(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    body = pod("stress", image="polinux/stress", restart="Never")
    body["spec"]["containers"][0].update(
        command=["stress"],
        args=["--vm", "1", "--vm-bytes", "150M", "--vm-hang", "1"],
        resources={"limits": {"memory": "200Mi"}},
    )
    run(sim, core, body)
    sim.advance(60, step=10)
    assert phase(core, "stress") == "Running"


# -- errors ------------------------------------------------------------------------------------------


def test_a_missing_pod_is_not_found(core: client.CoreV1Api) -> None:
    assert log_error(core, "ghost") == (404, "NotFound", 'pods "ghost" not found')


def test_an_unknown_container_is_a_bad_request(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    run(sim, core, script("one", "sleep 3600"))
    assert log_error(core, "one", container="nope") == (
        400,
        "BadRequest",
        "container nope is not valid for pod one",
    )


def test_several_containers_need_a_name(sim: world.BackgroundWorld, core: client.CoreV1Api) -> None:
    body = script("pair", "echo from a; sleep 3600")
    body["spec"]["containers"].append(
        {"name": "b", "image": "busybox:1.36", "command": ["sh", "-c", "echo from b"]}
    )
    body["spec"]["containers"][0]["name"] = "a"
    run(sim, core, body)
    assert log_error(core, "pair") == (
        400,
        "BadRequest",
        "a container name must be specified for pod pair, choose one of: [a b]",
    )
    assert core.read_namespaced_pod_log("pair", NS, container="a") == "from a\n"
    assert core.read_namespaced_pod_log("pair", NS, container="b") == "from b\n"


def test_a_container_still_being_created_is_waiting(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, script("fresh", "echo hi"))
    sim.advance(1)
    assert log_error(core, "fresh") == (
        400,
        "BadRequest",
        'container "main" in pod "fresh" is waiting to start: ContainerCreating',
    )


def test_image_pull_failures_are_worded_for_people(
    sim: world.BackgroundWorld, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod("missing", image="registry.example.com/team/notfound:v1"))
    advance_until(
        sim, lambda: status(core, "missing").state.waiting.reason == "ErrImagePull", limit=10, step=1
    )
    assert (
        log_error(core, "missing")[2]
        == 'container "main" in pod "missing" is waiting to start: image can\'t be pulled'
    )
    advance_until(
        sim, lambda: status(core, "missing").state.waiting.reason == "ImagePullBackOff", limit=10, step=1
    )
    assert log_error(core, "missing")[2] == (
        'container "main" in pod "missing" is waiting to start: trying and failing to pull image'
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param(
            "tailLines=-1",
            'PodLogOptions "one" is invalid: tailLines: Invalid value: -1: '
            "must be greater than or equal to 0",
            id="negative-tail",
        ),
        pytest.param(
            "limitBytes=0",
            'PodLogOptions "one" is invalid: limitBytes: Invalid value: 0: must be greater than 0',
            id="zero-limit",
        ),
        pytest.param(
            "sinceSeconds=0&tailLines=-2",
            'PodLogOptions "one" is invalid: [tailLines: Invalid value: -2: must be greater than or equal '
            "to 0, sinceSeconds: Invalid value: 0: must be greater than 0]",
            id="two-errors",
        ),
        pytest.param(
            "sinceSeconds=5&sinceTime=2025-01-01T00:00:00Z",
            'PodLogOptions "one" is invalid: : Forbidden: '
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
            id="both-since",
        ),
    ],
)
def test_invalid_options_are_refused_as_upstream_validation_does(
    sim: world.BackgroundWorld, core: client.CoreV1Api, query: str, message: str
) -> None:
    run(sim, core, script("one", "sleep 3600"))
    code, body, content_type = raw_log(sim, "one", query)
    assert code == 422 and content_type.startswith("application/json")
    assert isinstance(body, dict)
    assert (body["reason"], body["message"], body["details"]["kind"]) == ("Invalid", message, "PodLogOptions")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param("tailLines=ten", 'strconv.ParseInt: parsing "ten": invalid syntax', id="not-a-number"),
        pytest.param(
            "sinceTime=yesterday",
            'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"',
            id="not-a-time",
        ),
        pytest.param(
            "sinceTime=2025-13-01T00:00:00Z",
            'parsing time "2025-13-01T00:00:00Z": month out of range',
            id="month-13",
        ),
        pytest.param(
            "sinceTime=2025-02-30T00:00:00Z",
            'parsing time "2025-02-30T00:00:00Z": day out of range',
            id="february-30",
        ),
        pytest.param(
            "sinceTime=2025-01-01T00:00:00",
            'parsing time "2025-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"',
            id="no-zone",
        ),
    ],
)
def test_undecodable_options_are_bad_requests(
    sim: world.BackgroundWorld, core: client.CoreV1Api, query: str, message: str
) -> None:
    run(sim, core, script("one", "sleep 3600"))
    code, body, _ = raw_log(sim, "one", query)
    assert isinstance(body, dict)
    assert (code, body["reason"], body["message"]) == (400, "BadRequest", message)


def test_discovery_lists_pods_log(sim: world.BackgroundWorld) -> None:
    with urllib.request.urlopen(f"{sim.url}/api/v1") as response:
        found = {r["name"]: r for r in json.loads(response.read())["resources"]}
    assert (found["pods/log"]["kind"], found["pods/log"]["verbs"]) == ("Pod", ["get"])


def test_a_running_containers_log_is_replayed_after_a_restart_from_saved_state(tmp_path: Path) -> None:
    text = "echo one; sleep 5; echo two; sleep 10; echo three; sleep 3600"
    with world.BackgroundWorld(world.WorldConfig(state_dir=tmp_path)) as first:
        with client.ApiClient(client.Configuration(host=first.url)) as api:
            run(first, client.CoreV1Api(api), script("keeper", text))
        first.advance(6)
    second = world.BackgroundWorld(world.WorldConfig(state_dir=tmp_path))
    with second, client.ApiClient(client.Configuration(host=second.url)) as api:
        core = client.CoreV1Api(api)
        assert core.read_namespaced_pod_log("keeper", NS) == "one\ntwo\n", "lines from before the restart"
        second.advance(10)
        lines = stamped(core.read_namespaced_pod_log("keeper", NS, timestamps=True))
        started = status(core, "keeper").state.running.started_at
        assert [((m - started).total_seconds(), t) for m, t in lines] == [
            (0.0, "one"),
            (5.0, "two"),
            (15.0, "three"),
        ]
