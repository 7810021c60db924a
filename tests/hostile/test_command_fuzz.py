"""Fuzzing `/gpu` text: every input gets an answer, every refusal says why, every accepted run is a valid pod.

The parser (`commands.parse_gpu_command`) and the handler's ack (`handlers.gpu.ack_text`) are what runs
inside Slack's 3 s on every command, so neither may raise on anything. Subcommands are treated alike:
any result that is not a UsageError counts as accepted. An accepted run is built into its pod with a
hostile Slack identity, and the pod is judged by Kubernetes' rules as written out in `kube_rules`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from bot.core import commands, models, podspec, warm
from handlers import gpu
from tests.hostile import fuzzing, hostile_text, kube_rules

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PROFILE = models.GpuProfile(
    name="t4",
    max_count=16,
    tolerations=(models.Toleration(key="nvidia.com/gpu", value="present", effect="NoSchedule"),),
    node_selector=(("cloud.google.com/gke-accelerator", "nvidia-tesla-t4"),),
)
SLACK_TEXT_LIMIT = 40_000
"""Slack cuts message text beyond this; a refusal longer than it would lose its `Try:` line."""
SUBJECTS = re.compile(
    r"image|command|option|name|quote|gpu|hour|cpu|core|memory|size|schedule|time zone|days|workload|"
    r"character|help|topic|tag|digest|registry|repository|value|lease|nul|extend|release|status|doctor",
    re.IGNORECASE,
)
"""What a refusal may be about; one of these (or a quoted piece of the input) says which part is wrong."""
QUOTED = re.compile(r"`[^`]+`|'[^']*'|\"[^\"]*\"")


def refusal_problems(refused: models.UsageError, ack: str | None) -> list[str]:
    problems = []
    if not refused.problem.strip():
        problems.append("empty problem")
    if not (SUBJECTS.search(refused.problem) or QUOTED.search(refused.problem)):
        problems.append(f"says no subject: {refused.problem!r}")
    if not refused.suggestion.startswith("/gpu"):
        problems.append(f"suggestion is no /gpu command: {refused.suggestion[:80]!r}")
    if ack is None or refused.problem not in ack or "Try: `/gpu" not in ack:
        problems.append("the ack does not carry the problem and the suggestion")
    elif len(ack) > SLACK_TEXT_LIMIT:
        problems.append(f"the ack is {len(ack)} characters, past Slack's cut")
    return problems


def pod_for(
    request: models.RunRequest, owner: models.Owner, security: models.PodSecurity | None = None
) -> dict[str, Any]:
    return podspec.build_pod(
        request,
        PROFILE,
        owner,
        now=NOW,
        lease=timedelta(hours=request.hours or 4),
        channel="C0GPU",
        thread_ts="1714564800.000100",
        namespace="gpu-workloads",
        security=security,
        request_key=podspec.request_key("13345.4521.abcdef"),
    )


def answer(text: str) -> tuple[models.GpuCommand | models.UsageError, str | None]:
    """What the handler does with `text` before acking, and the ack serialised as Bolt serialises it."""
    parsed = commands.parse_gpu_command(text)
    ack = gpu.ack_text(parsed)
    json.dumps({"text": ack})
    event(f"answered with {type(parsed).__name__}")
    return parsed, ack


def accepted_problems(parsed: models.GpuCommand) -> list[str]:
    """Any accepted command: a name it carries is one Kubernetes can look up (never a path)."""
    name = getattr(parsed, "name", None)
    problems = [f"name {name!r}: {e}" for e in kube_rules.dns1123_label(name)] if name else []
    if isinstance(parsed, models.RunRequest):
        pod = pod_for(parsed, models.Owner("U01ABCDEF", "alice"))
        problems += kube_rules.pod_problems(pod)
        container = pod["spec"]["containers"][0]
        if container.get("command", []) != list(parsed.command) or "args" in container:
            problems.append("the container's argv is not the command as parsed")
    return problems


@fuzzing.fuzz(0.53)
@given(hostile_text.gpu_text)
def test_any_text_is_answered_and_every_refusal_says_why(text: str) -> None:
    parsed, ack = answer(text)
    if isinstance(parsed, models.UsageError):
        assert not refusal_problems(parsed, ack), text
    else:
        assert not accepted_problems(parsed), text


@fuzzing.fuzz(0.25)
@given(hostile_text.run_texts(), hostile_text.slack_ids, hostile_text.slack_names, hostile_text.slack_ids)
def test_an_accepted_run_is_a_valid_pod_whatever_slack_says_about_the_user(
    typed: tuple[str, list[str]], user_id: str, user_name: str, team_id: str
) -> None:
    text, argv = typed
    parsed, ack = answer(text)
    if isinstance(parsed, models.UsageError):
        assert not refusal_problems(parsed, ack), text
        return
    assert isinstance(parsed, models.RunRequest) and ack and parsed.image in ack
    pod = pod_for(parsed, models.Owner(user_id, user_name, team_id))
    assert not kube_rules.pod_problems(pod), (text, user_id, user_name)
    container = pod["spec"]["containers"][0]
    assert container.get("command", []) == argv and "args" not in container  # as typed, no wrapper
    assert kube_rules.shell_wrapped(container) == kube_rules.shell_wrapped({"command": argv})


_security = st.builds(
    models.PodSecurity,
    run_as_non_root=st.booleans(),
    run_as_user=st.one_of(st.none(), st.integers(1, 2**31 - 1)),
    read_only_root_filesystem=st.booleans(),
)


def _beyond_user_fields(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod's spec without what a user may choose (image, argv, amounts): config alone decides the rest."""
    spec: dict[str, Any] = copy.deepcopy(pod["spec"])
    for container in spec["containers"]:
        for field in ("image", "command", "resources"):
            container.pop(field, None)
    return spec


@fuzzing.fuzz(0.15)
@given(
    st.one_of(
        hostile_text.run_texts(hostile_text.hostile_argv), hostile_text.gpu_text.map(lambda t: (t, []))
    ),
    _security,
)
def test_no_command_text_can_ask_for_more_than_the_configured_security(
    typed: tuple[str, list[str]], security: models.PodSecurity
) -> None:
    parsed = commands.parse_gpu_command(typed[0])
    if not isinstance(parsed, models.RunRequest):
        return
    pod = pod_for(parsed, models.Owner("U01ABCDEF"), security)
    baseline = pod_for(models.RunRequest(image="ubuntu"), models.Owner("U01ABCDEF"), security)
    assert _beyond_user_fields(pod) == _beyond_user_fields(baseline)
    spec, (container,) = pod["spec"], pod["spec"]["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": security.read_only_root_filesystem,
        "capabilities": {"drop": ["ALL"]},
    }
    assert spec["securityContext"].get("runAsNonRoot", False) is security.run_as_non_root
    assert spec["securityContext"].get("runAsUser") == security.run_as_user
    assert not {"volumes", "hostNetwork", "hostPID", "hostIPC"} & set(spec)
    assert "volumeMounts" not in container and spec["automountServiceAccountToken"] is False


@fuzzing.fuzz(0.05)
@given(st.lists(st.sampled_from(sorted(commands.USAGES)), min_size=1, max_size=3), hostile_text.word)
def test_every_subcommand_answers_any_argument(verbs: list[str], argument: str) -> None:
    """`warm`, `doctor` and any later subcommand: whatever follows the verb, an answer and no raise."""
    parsed, ack = answer(" ".join([*verbs, hostile_text.quoted([argument])]))
    if isinstance(parsed, models.UsageError):
        assert not refusal_problems(parsed, ack)
    else:
        assert not accepted_problems(parsed)


# -- what the fuzz found, pinned -----------------------------------------------------------------------


def test_a_text_longer_than_slack_advises_is_refused_unread() -> None:
    for text in ("run " + "a" * 1_000_000, "run img --name " + "x" * 50_000, "run img -- " + "x " * 3000):
        refused = commands.parse_gpu_command(text)
        assert isinstance(refused, models.UsageError) and f"{len(text):,} characters" in refused.problem
    accepted = commands.parse_gpu_command("run ubuntu -- " + "x" * (commands.MAX_TEXT_LENGTH - 14))
    assert isinstance(accepted, models.RunRequest)


def test_a_nul_in_the_command_is_refused_before_a_node_is_bought() -> None:
    refused = commands.parse_gpu_command("run ubuntu -- echo 'a\x00b'")
    assert isinstance(refused, models.UsageError) and "NUL" in refused.problem
    assert refused.suggestion == "/gpu run ubuntu -- echo ab"


def test_a_warm_schedule_with_thousands_of_digits_is_refused_not_raised() -> None:
    refused = warm.parse("gpu-pool min " + "9" * 5000 + " weekdays 09:00-18:00 UTC")
    assert isinstance(refused, models.UsageError) and "not a schedule" in refused.problem


def test_an_image_refusal_quotes_a_clipped_piece_of_the_input() -> None:
    refused = commands.parse_gpu_command("run " + "\U000740d3" * 3000)
    assert isinstance(refused, models.UsageError) and "image reference" in refused.problem
    assert len(refused.problem) < 400


def test_the_fuzz_reaches_every_kind_of_answer() -> None:
    """The strategies are not all refusals: each kind of result turns up in a fixed sample."""
    seen = {type(commands.parse_gpu_command(t)).__name__ for t in hostile_text.seeded_commands(7, 3000)}
    kinds = {cls.__name__ for cls in (models.UsageError, models.HelpRequest, models.RunRequest)}
    assert kinds <= seen, seen
    run = commands.parse_gpu_command("run ubuntu --name=$(rm -rf /)")
    assert isinstance(run, models.UsageError) and "--name" in run.problem
    assert dataclasses.is_dataclass(run)
