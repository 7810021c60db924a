"""`/gpu …` parsing and the run checks (profile, bounds, quota): every refusal says what to type instead."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core import commands, models, quota

GIB = 1024**3
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
T4 = models.GpuProfile(name="t4", max_count=1)
A100 = models.GpuProfile(name="a100", max_count=8)
PROFILES = {"t4": T4, "a100": A100}
POLICY = models.QuotaPolicy(max_gpus_per_user=2, default_lease_hours=4, max_lease_hours=24)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"run {IMAGE} -- sleep 3600", models.RunRequest(image=IMAGE, command=("sleep", "3600"))),
        (f"run {IMAGE}", models.RunRequest(image=IMAGE)),
        (f"RUN {IMAGE}", models.RunRequest(image=IMAGE)),
        (f"run --gpus 2 {IMAGE}", models.RunRequest(image=IMAGE, gpus=2)),
        (f"run {IMAGE} --gpus=2 --type=A100", models.RunRequest(image=IMAGE, gpus=2, profile="a100")),
        (f"run {IMAGE} --hours 1.5", models.RunRequest(image=IMAGE, hours=1.5)),
        (f"run {IMAGE} --hours 90m", models.RunRequest(image=IMAGE, hours=1.5)),
        (f"run {IMAGE} --hours 2h", models.RunRequest(image=IMAGE, hours=2.0)),
        (f"run {IMAGE} --port 8888", models.RunRequest(image=IMAGE, ports=(8888,))),
        (f"run {IMAGE} --port 8888 --port=6006,8888", models.RunRequest(image=IMAGE, ports=(8888, 6006))),
        ("run --type notebook", models.RunRequest(image="", profile="notebook")),
        (
            f"run {IMAGE} --cpu 500m --memory 16Gi",
            models.RunRequest(image=IMAGE, cpu_millis=500, memory_bytes=16 * GIB),
        ),
        (
            f"run {IMAGE} --cpu 1.5 --memory=512Mi",
            models.RunRequest(image=IMAGE, cpu_millis=1500, memory_bytes=512 << 20),
        ),
        (f"run {IMAGE} --name train-1", models.RunRequest(image=IMAGE, name="train-1")),
        (
            f"run {IMAGE} -- python -c \"print('a b')\" --gpus 3",
            models.RunRequest(image=IMAGE, command=("python", "-c", "print('a b')", "--gpus", "3")),
        ),
        (
            f"run {IMAGE} -- sh -c 'echo $HOME; ls | wc'",
            models.RunRequest(image=IMAGE, command=("sh", "-c", "echo $HOME; ls | wc")),
        ),
        (
            f"run {IMAGE} -- echo &lt;tag&gt; &amp;",
            models.RunRequest(image=IMAGE, command=("echo", "<tag>", "&")),
        ),
        (
            f"run {IMAGE} -- echo \u201chello world\u201d",
            models.RunRequest(image=IMAGE, command=("echo", "hello world")),
        ),
        (f"run {IMAGE} --", models.RunRequest(image=IMAGE)),
        (
            "run <http://nvcr.io/nvidia/pytorch:24.01-py3|nvcr.io/nvidia/pytorch:24.01-py3>",
            models.RunRequest(image="nvcr.io/nvidia/pytorch:24.01-py3"),
        ),
        ("", models.HelpRequest()),
        ("   ", models.HelpRequest()),
        ("help", models.HelpRequest()),
        ("--help", models.HelpRequest()),
        ("help run", models.HelpRequest(topic="run")),
        ("help stop", models.HelpRequest(topic="release")),
        ("status", models.StatusRequest()),
        ("status ALL", models.StatusRequest(everyone=True)),
        ("release", models.ReleaseRequest()),
        ("release all", models.ReleaseRequest(everything=True)),
        ("release gpu-u01abc-1a2b3c", models.ReleaseRequest(name="gpu-u01abc-1a2b3c")),
        ("extend", models.ExtendRequest()),
        ("extend 2", models.ExtendRequest(hours=2.0)),
        ("extend 30m", models.ExtendRequest(hours=0.5)),
        ("extend train-1", models.ExtendRequest(name="train-1")),
        ("extend train-1 3", models.ExtendRequest(name="train-1", hours=3.0)),
    ],
)
def test_accepted_commands(text: str, expected: models.GpuCommand) -> None:
    parsed = commands.parse_gpu_command(text)
    if isinstance(expected, models.RunRequest):
        assert isinstance(parsed, models.RunRequest)
        assert parsed == models.RunRequest(**{**vars(expected), "text": parsed.text})
        assert parsed.text == text.strip()
    else:
        assert parsed == expected


@pytest.mark.parametrize(
    ("text", "problem", "suggestion"),
    [
        ("run", "needs an image", f"/gpu run {IMAGE}"),
        ("run -- sleep 1", "needs an image", f"/gpu run {IMAGE} -- sleep 1"),
        ("run --gpus", "`--gpus` needs a value", f"/gpu run {IMAGE} --gpus 1"),
        ("run img --gpus --hours 2", "`--gpus` needs a value", "/gpu run img --gpus 1"),
        ("run img --gpus= ", "`--gpus` needs a value", "/gpu run img --gpus 1"),
        ("run img --gpus -- sleep 1", "`--gpus` needs a value", "/gpu run img --gpus 1 -- sleep 1"),
        ("run img --gpus two", "whole number", "/gpu run img --gpus 1"),
        ("run img --gpus 1.5", "whole number", "/gpu run img --gpus 1"),
        ("run img --gpus 0", "between 1 and 16", "/gpu run img --gpus 1"),
        ("run img --gpus -1", "whole number", "/gpu run img --gpus 1"),
        ("run img --gpus 99", "between 1 and 16", "/gpu run img --gpus 1"),
        ("run img --gpus ٣", "whole number", "/gpu run img --gpus 1"),
        ("run img --gpus 1 --gpus 2", "given twice", "/gpu run img --gpus 1"),
        ("run img --gpu 2", "did you mean `--gpus`", "/gpu run img --gpus 2"),
        ("run img --gpu=2", "did you mean `--gpus`", "/gpu run img --gpus 2"),
        ("run img --mem 16Gi", "did you mean `--memory`", "/gpu run img --memory 16Gi"),
        ("run img --frobnicate", "Unknown option `--frobnicate`", "/gpu run img"),
        ("run img -g 2", "Unknown option `-g`", "/gpu run img --gpus 2"),
        ("run img --hours soon", "number of hours", "/gpu run img --hours 4"),
        ("run img --hours 0", "between 3 minutes and 720 hours", "/gpu run img --hours 4"),
        ("run img --hours 1000", "between 3 minutes and 720 hours", "/gpu run img --hours 4"),
        ("run img --hours nan", "number of hours", "/gpu run img --hours 4"),
        ("run img --hours inf", "number of hours", "/gpu run img --hours 4"),
        ("run img --cpu lots", "cores like", "/gpu run img --cpu 2"),
        ("run img --cpu 50m", "between 100m and 256 cores", "/gpu run img --cpu 2"),
        ("run img --cpu 1000", "between 100m and 256 cores", "/gpu run img --cpu 2"),
        ("run img --memory 16GB", "sizes like", "/gpu run img --memory 16Gi"),
        ("run img --memory 16g", "sizes like", "/gpu run img --memory 16Gi"),
        ("run img --memory big", "sizes like", "/gpu run img --memory 8Gi"),
        ("run img --memory 16", "between 64Mi and 4Ti", "/gpu run img --memory 8Gi"),
        ("run img --memory 9Ti", "between 64Mi and 4Ti", "/gpu run img --memory 8Gi"),
        ("run img --name My_Job", "`--name` must be lowercase", "/gpu run img --name my-job"),
        ("run img --name -x-", "`--name` must be lowercase", "/gpu run img --name x"),
        ("run img --name " + "a" * 64, "at most 63", "/gpu run img --name " + "a" * 63),
        ("run img --name all", "reserved", "/gpu run img --name my-training"),
        ("run img --type T_4", "GPU profile name", "/gpu run img --type t4"),
        ("run img --port 0", "from 1 to 65535, not '0'", "/gpu run img --port 8888"),
        ("run img --port 65536", "from 1 to 65535", "/gpu run img --port 8888"),
        ("run img --port http", "from 1 to 65535, not 'http'", "/gpu run img --port 8888"),
        ("run img --port 1,2,3,4,5,6,7,8,9", "at most 8 ports", "/gpu run img --port 1,2,3,4,5,6,7,8"),
        ("run img --prot 8888", "did you mean `--port`", "/gpu run img --port 8888"),
        ("run --port 8888", "needs an image", f"/gpu run {IMAGE} --port 8888"),
        ("run --type notebook --port x", "from 1 to 65535", "/gpu run --type notebook --port 8888"),
        ("run img sleep 3600", "put the command after `--`", "/gpu run img -- sleep 3600"),
        ("run img --gpus 2 sleep 3600", "put the command after `--`", "/gpu run img --gpus 2 -- sleep 3600"),
        ("run NVIDIA/cuda --gpus 1", "must be lowercase", "/gpu run nvidia/cuda --gpus 1"),
        ("run img;reboot", "`;` cannot appear", f"/gpu run {IMAGE}"),
        ("run https://ghcr.io/a/b", "https://", "/gpu run ghcr.io/a/b"),
        ("run 'img -- sleep'", "spaces", f"/gpu run {IMAGE}"),
        (
            'run img -- echo "unclosed',
            "quote is not closed",
            "/gpu run IMAGE -- python -c \"print('hello')\"",
        ),
        ("run img -- echo \\", "quote is not closed", "/gpu run IMAGE -- python -c \"print('hello')\""),
        ("rnu img", "did you mean `run`", "/gpu run img"),
        ("start img", "did you mean `run`", "/gpu run img"),
        ("stop", "did you mean `release`", "/gpu release"),
        ("launch", "did you mean `run`", f"/gpu run {IMAGE}"),
        ("ls", "did you mean `status`", "/gpu status"),
        ("nvidia/cuda:12", "say `run` first", "/gpu run nvidia/cuda:12"),
        ("dance", "not a `/gpu` command", "/gpu help"),
        ("status mine", "takes nothing, or `all`", "/gpu status"),
        ("status all now", "takes nothing, or `all`", "/gpu status all"),
        ("release a b", "one workload name", "/gpu release a"),
        ("release Bad_Name", "not a workload name", "/gpu release NAME"),
        ("extend a 2 3", "a workload name and a number", "/gpu extend [NAME] [HOURS]"),
        ("extend a soon", "not a number of hours", "/gpu extend a 4"),
        ("extend a 0", "3 minutes to 720 hours", "/gpu extend a 4"),
        ("extend Bad_Name", "not a workload name", "/gpu extend NAME 4"),
        ("extend x -1", "a positive number of hours, not -1", "/gpu extend x 4"),
        ("extend -2h", "a positive number of hours, not -2h", "/gpu extend 4"),
        ("help me please", "No help", "/gpu help"),
    ],
)
def test_refusals_say_what_is_wrong_and_what_to_type(text: str, problem: str, suggestion: str) -> None:
    refused = commands.parse_gpu_command(text)
    assert isinstance(refused, models.UsageError), refused
    assert problem in refused.problem
    assert refused.suggestion == suggestion
    assert refused.problem in refused.message and f"`{suggestion}`" in refused.message


@pytest.mark.parametrize(
    "text",
    [
        "run img --gpus two",
        "run img --gpu 2",
        "run img sleep 3600",
        "run NVIDIA/cuda",
        "run img --memory 16GB",
        "run img --name My_Job",
        "rnu img",
    ],
)
def test_suggested_run_commands_are_accepted(text: str) -> None:
    refused = commands.parse_gpu_command(text)
    assert isinstance(refused, models.UsageError)
    assert isinstance(commands.parse_gpu_command(refused.suggestion.removeprefix("/gpu ")), models.RunRequest)


def test_format_run_round_trips() -> None:
    text = (
        f"run {IMAGE} --gpus 2 --type a100 --hours 1.5 --cpu 500m --memory 16Gi --name x"
        " --port 8888 --port 6006 -- sh -c 'a; b'"
    )
    parsed = commands.parse_gpu_command(text)
    assert isinstance(parsed, models.RunRequest)
    again = commands.parse_gpu_command(commands.format_run(parsed).removeprefix("/gpu "))
    assert isinstance(again, models.RunRequest)
    assert again == models.RunRequest(**{**vars(parsed), "text": again.text})


def test_help_covers_every_command() -> None:
    overview = commands.help_text()
    assert all(usage in overview for usage in commands.USAGES.values())
    assert "--memory" in commands.help_text("run")
    extend = commands.help_text("extend")
    assert "your only running one" in extend and "capped" in extend and "Owner or admin only" in extend


# --- run checks: profile, bounds, quota -------------------------------------------------------------------


def _run(text: str) -> models.RunRequest:
    parsed = commands.parse_gpu_command(text)
    assert isinstance(parsed, models.RunRequest)
    return parsed


def _checked(text: str, owned: int) -> models.GpuProfile | models.UsageError:
    """The launcher's order: the request against the profiles and limits, then the user's quota."""
    request = _run(text)
    profile = quota.check_request(request, profiles=PROFILES, default_profile="t4", policy=POLICY)
    if isinstance(profile, models.UsageError):
        return profile
    return quota.check_quota(request, owned, POLICY) or profile


@pytest.mark.parametrize(
    ("text", "owned", "problem", "suggestion"),
    [
        ("run img --type v100", 0, "no GPU type `v100`. Known types: `a100`, `t4`", "/gpu run img --type t4"),
        ("run img --gpus 2", 0, "at most 1 GPU (one node's worth)", "/gpu run img"),
        ("run img --type a100 --gpus 9", 0, "at most 8 GPUs", "/gpu run img --gpus 8 --type a100"),
        ("run img --hours 48", 0, "at most 24 hours", "/gpu run img --hours 24"),
        ("run img", 2, "quota is 2; you already hold 2", "/gpu release NAME"),
        ("run img --type a100 --gpus 2", 1, "quota is 2; you already hold 1", "/gpu run img --type a100"),
        ("run img --type a100 --gpus 2 -- sleep 1", 5, "Release one first", "/gpu release NAME"),
    ],
)
def test_run_checks_refuse_with_a_fix(text: str, owned: int, problem: str, suggestion: str) -> None:
    refused = _checked(text, owned)
    assert isinstance(refused, models.UsageError), refused
    assert problem in refused.problem
    assert refused.suggestion == suggestion


@pytest.mark.parametrize(
    ("text", "owned", "profile"),
    [("run img", 0, T4), ("run img", 1, T4), ("run img --type a100 --gpus 2", 0, A100)],
)
def test_run_checks_accept(text: str, owned: int, profile: models.GpuProfile) -> None:
    checked = _checked(text, owned)
    assert checked == profile


def test_check_quota_alone() -> None:
    assert quota.check_quota(_run("run img"), 1, POLICY) is None
    assert isinstance(quota.check_quota(_run("run img"), 2, POLICY), models.UsageError)
    assert isinstance(
        quota.check_quota(_run("run img"), 0, models.QuotaPolicy(max_gpus_per_user=0)), models.UsageError
    )


def test_lease_hours_default_and_explicit() -> None:
    assert quota.lease_hours(_run("run img"), POLICY) == 4
    assert quota.lease_hours(_run("run img --hours 2"), POLICY) == 2


# --- properties -------------------------------------------------------------------------------------------

_words = st.sampled_from(
    ["run", "status", "release", "extend", "help", "all", "--", "--gpus", "--gpus=", "--type", "--hours",
     "--cpu", "--memory", "--name", "-g", IMAGE, "img", "2", "0", "1.5", "90m", "500m", "8Gi", "'", '"', "\\",
     "&amp;", "<http://x.io|x.io>", "NVIDIA/cuda", "a;b", "\u201c", "-1"]
)  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=120))
def test_arbitrary_text_never_raises(text: str) -> None:
    parsed = commands.parse_gpu_command(text)
    assert isinstance(parsed, models.GpuCommand | models.UsageError)
    if isinstance(parsed, models.UsageError):
        assert parsed.problem and parsed.suggestion.startswith("/gpu")


@settings(max_examples=2000, deadline=None)
@given(st.lists(_words, max_size=10).map(" ".join))
def test_command_like_text_never_raises(text: str) -> None:
    parsed = commands.parse_gpu_command(text)
    assert isinstance(parsed, models.GpuCommand | models.UsageError)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("warm", models.WarmRequest()),
        ("warm remove 2", models.WarmRequest(remove=2)),
        ("WARM rm 1", models.WarmRequest(remove=1)),
        ("doctor", models.DoctorRequest()),
    ],
)
def test_warm_and_doctor_parse(text: str, parsed: models.GpuCommand) -> None:
    assert commands.parse_gpu_command(text) == parsed


def test_warm_adds_a_schedule_typed_with_or_without_add() -> None:
    bare = commands.parse_gpu_command("warm gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin")
    added = commands.parse_gpu_command("warm add gpu-pool min 1 weekdays 09:00-18:00 Europe/Berlin")
    assert isinstance(bare, models.WarmRequest) and bare == added
    assert bare.add is not None and (bare.add.pool, bare.add.zone) == ("gpu-pool", "Europe/Berlin")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("warm remove", "by its number"),
        ("warm remove 0", "by its number"),
        ("warm remove two", "by its number"),
        ("warm gpu-pool min 1 weekdays", "is not a schedule"),
        ("doctor --manifest pod.yaml", "`/gpu doctor` takes nothing"),
    ],
)
def test_warm_and_doctor_refusals(text: str, says: str) -> None:
    refused = commands.parse_gpu_command(text)
    assert isinstance(refused, models.UsageError) and says in refused.problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("logs", models.LogsRequest()),
        ("logs train-1", models.LogsRequest(name="train-1")),
        ("logs --tail 200", models.LogsRequest(tail=200)),
        ("logs train-1 --tail 5", models.LogsRequest(name="train-1", tail=5)),
        ("logs --tail 5 train-1", models.LogsRequest(name="train-1", tail=5)),
    ],
)
def test_logs_names_a_workload_and_how_many_lines(text: str, expected: models.LogsRequest) -> None:
    assert commands.parse_gpu_command(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("logs --tail", "`--tail` takes a number of lines from 1 to 10,000"),
        ("logs --tail 0", "not '0'"),
        ("logs --tail 99999", "not '99999'"),
        ("logs a b", "takes one workload name"),
        ("logs -f", "takes one workload name"),
        ("log train-1", "did you mean `logs`?"),
    ],
)
def test_logs_refusals_say_what_to_type(text: str, says: str) -> None:
    parsed = commands.parse_gpu_command(text)
    assert isinstance(parsed, models.UsageError) and says in parsed.message


NOTEBOOK = models.GpuProfile(name="notebook", image="quay.io/jupyter/base-notebook", ports=(8888,))


def test_a_run_without_an_image_takes_its_profiles_image_and_ports() -> None:
    request = models.RunRequest(image="", profile="notebook")
    checked = quota.check_request(
        request, profiles={"notebook": NOTEBOOK}, default_profile="t4", policy=POLICY
    )
    assert checked == NOTEBOOK
    filled = quota.with_profile_defaults(request, NOTEBOOK)
    assert (filled.image, filled.ports) == ("quay.io/jupyter/base-notebook", (8888,))
    own = quota.with_profile_defaults(models.RunRequest(image=IMAGE, ports=(9000,)), NOTEBOOK)
    assert (own.image, own.ports) == (IMAGE, (9000,)), "what was typed wins"


def test_a_run_without_an_image_on_a_profile_without_one_is_refused_with_a_fix() -> None:
    request = models.RunRequest(image="", profile="t4")
    refused = quota.check_request(request, profiles=PROFILES, default_profile="t4", policy=POLICY)
    assert isinstance(refused, models.UsageError)
    assert refused.problem == "`/gpu run` needs an image: the `t4` type has none of its own."
    assert refused.suggestion == f"/gpu run {IMAGE} --type t4"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("usage", models.UsageRequest()),
        ("usage month", models.UsageRequest(period="month")),
        ("usage WEEK", models.UsageRequest(period="week")),
        ("usage @Alice", models.UsageRequest(user_name="alice")),
        ("usage month <@U01ABC2DEF|alice>", models.UsageRequest(period="month", user_id="U01ABC2DEF")),
        ("usage <@U01ABC2DEF> week", models.UsageRequest(user_id="U01ABC2DEF")),
        ("usage @U01ABC2DEF", models.UsageRequest(user_id="U01ABC2DEF")),
        ("spend", models.UsageError("`spend` is not a `/gpu` command; did you mean `usage`?", "/gpu usage")),
        ("help usage", models.HelpRequest(topic="usage")),
    ],
)
def test_usage_takes_a_period_and_a_user_in_any_order(text: str, expected: object) -> None:
    assert commands.parse_gpu_command(text) == expected


@pytest.mark.parametrize(
    ("text", "got"),
    [
        ("usage fortnight", "fortnight"),
        ("usage week month", "week month"),
        ("usage @alice @bob", "@alice @bob"),
        ("usage @", "@"),
    ],
)
def test_usage_refuses_what_it_does_not_take(text: str, got: str) -> None:
    parsed = commands.parse_gpu_command(text)
    assert parsed == models.UsageError(
        f"`/gpu usage` takes `week` or `month`, and one `@user` (got {got!r}).", commands.USAGES["usage"]
    )


def test_usage_is_in_the_help_and_no_longer_a_help_flag() -> None:
    assert "`/gpu usage [week|month] [@user]`" in commands.help_text()
    assert commands.help_text("usage").startswith("`/gpu usage [week|month] [@user]`\nWhat GPUs cost")
