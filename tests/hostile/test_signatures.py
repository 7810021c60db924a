"""HTTP mode under attack: forged, missing, stale and replayed signed requests against the real bot.

The bot is `app.build` behind `http_mode.make_http_server` on a loopback port, with the sim, the emulator and
Redis behind it. A `ListenerGate` (a real Bolt middleware, after Bolt's signature check) records each
request that goes on to gpubot's listeners. Every invalid case carries a `/gpu run`, so one that got
through would also leave a pod in the sim and a thread in the emulator.

Replays: Slack's signature has no nonce; within its five minutes a copied request verifies again, and
its ack (parse and answer, no I/O) runs again. What must not run twice is the slow half: each request's
`trigger_id` is claimed in Redis (`Services.first_delivery`) before anything is done, so a replayed run
makes no second pod, a replayed extend extends once and a replayed release releases once. After the
five minutes the replay is an expired case, refused before any listener.
"""

from __future__ import annotations

import collections
import json
import threading

from sim.cluster import world
from sim.slack.http_mode import signature
from sim.slack.runner import BackgroundSlack
from tests.hostile import signed_requests
from tests.hostile.conftest import HttpBot
from tests.hostile.signed_requests import Answer, Case, command_body, post, slack_headers
from tests.integration.botkit import WAIT, gpubot_pods, replies, roots, wait_for_pods
from tests.integration.test_http_mode import SECRET

SEED = 20240501
REFUSED = Answer(401, json.dumps({"error": "invalid request"}))
REPLAYS = 20


def send(http_bot: HttpBot, case: Case) -> Answer:
    body, headers = case.build(signed_requests.now())
    return post(http_bot.url, body, headers)


def test_forged_missing_and_stale_signatures_never_reach_a_listener(
    sim: world.BackgroundWorld, http_slack: BackgroundSlack, http_bot: HttpBot
) -> None:
    cases = signed_requests.generate(SECRET, SEED, forged=520, missing=80, stale=400, malformed=100, valid=80)
    answers = {case.trigger_id: send(http_bot, case) for case in cases}

    invalid = [case for case in cases if not case.genuine]
    wrongly_answered = [
        (case.kind, case.detail, answers[case.trigger_id])
        for case in invalid
        if answers[case.trigger_id] != REFUSED
    ]
    assert not wrongly_answered, wrongly_answered[:5]
    reached = collections.Counter(http_bot.gate.triggers())
    genuine = {case.trigger_id for case in cases if case.genuine}
    assert not [t for t in reached if t not in genuine], "an invalid request reached a listener"
    assert reached == collections.Counter(genuine)  # each genuine one once: the gate does count
    for case in cases:
        if case.genuine:
            answer = answers[case.trigger_id]
            assert answer.status == 200 and signed_requests.ack_text(answer), (case.detail, answer)

    kinds = collections.Counter(case.kind for case in invalid)
    assert len(invalid) >= 1000 and set(kinds) == {"forged", "missing", "expired", "future", "malformed"}
    assert not gpubot_pods(sim) and not roots(http_slack)
    assert not http_slack.calls("chat.postMessage") and not http_slack.calls("chat.postEphemeral")


def replay(http_bot: HttpBot, body: bytes, headers: dict[str, str], times: int) -> list[Answer]:
    """The same bytes and headers, `times` times; half of them at once, from threads."""
    answers: list[Answer] = []
    lock = threading.Lock()

    def one() -> None:
        answer = post(http_bot.url, body, headers)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(times // 2)]
    for thread in threads:
        thread.start()
    for _ in range(times - len(threads)):
        one()
    for thread in threads:
        thread.join(timeout=WAIT)
    return answers


def signed_now(text: str, trigger_id: str) -> tuple[bytes, dict[str, str]]:
    body = command_body(text, trigger_id)
    timestamp = str(signed_requests.now())
    return body, slack_headers(timestamp, signature(SECRET, timestamp, body))


def audit_actions(sim: world.BackgroundWorld) -> list[str]:
    (pod,) = gpubot_pods(sim)
    return [record["action"] for record in json.loads(pod["metadata"]["annotations"]["gpubot.dev/audit"])]


def settle(http_slack: BackgroundSlack, http_bot: HttpBot, mark: str) -> None:
    """Wait for a later genuine command's answer: the replays' slow halves were queued before it."""
    body, headers = signed_now("status", mark)
    before = len(http_slack.ephemerals("U_ALICE"))
    assert post(http_bot.url, body, headers).status == 200
    http_slack.wait_until(lambda: len(http_slack.ephemerals("U_ALICE")) > before, timeout=WAIT)


def test_a_replayed_run_extend_and_release_each_act_once(
    sim: world.BackgroundWorld, http_slack: BackgroundSlack, http_bot: HttpBot
) -> None:
    run = signed_now(signed_requests.RUN, "1.1.run")
    answers = replay(http_bot, *run, 1 + REPLAYS)
    assert all(a.status == 200 and "Requesting 1 GPU" in signed_requests.ack_text(a) for a in answers)
    wait_for_pods(sim, http_slack)
    settle(http_slack, http_bot, "1.2.settle")
    pods, threads = gpubot_pods(sim), roots(http_slack)
    assert (len(pods), len(threads)) == (1, 1), f"{len(pods)} pods, {len(threads)} threads for one run"
    (pod,), (root,) = pods, threads
    name = pod["metadata"]["name"]
    ok_runs = http_bot.bot.telemetry.registry.get_sample_value(
        "gpubot_commands_total", {"command": "run", "outcome": "ok"}
    )
    assert ok_runs == 1.0

    extend = signed_now(f"extend {name} 2", "1.3.extend")
    assert all(a.status == 200 for a in replay(http_bot, *extend, 1 + REPLAYS))
    http_slack.wait_until(lambda: audit_actions(sim).count("extend"), timeout=WAIT)
    settle(http_slack, http_bot, "1.4.settle")
    assert audit_actions(sim) == ["run", "extend"]

    release = signed_now(f"release {name}", "1.5.release")
    assert all(a.status == 200 for a in replay(http_bot, *release, 1 + REPLAYS))

    def closed() -> bool:
        return "Released by its owner" in roots(http_slack)[0]["text"]

    http_slack.wait_until(
        lambda: not gpubot_pods(sim) and closed(), timeout=WAIT
    )  # a pending pod goes at once
    settle(http_slack, http_bot, "1.6.settle")
    assert not [text for text in replies(http_slack, root) if "Released" in text]  # the owner's own: no news
    released = [e for e in http_slack.ephemerals("U_ALICE") if e["text"].startswith("Released ")]
    assert len(released) == 1 and len(roots(http_slack)) == 1
    assert len({p["metadata"]["uid"] for p in sim.pods()}) == 0

    sent = {"1.1.run", "1.3.extend", "1.5.release"}
    reached = collections.Counter(t for t in http_bot.gate.triggers() if t in sent)
    assert reached == dict.fromkeys(sent, 1 + REPLAYS)  # every replay verified and was acked...
    # ...and the one pod, one extension and one release above are all that came of them.
