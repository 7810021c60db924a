"""The workload model: what the simulated kubelet reads from a container's command (pure, table-driven)."""

from __future__ import annotations

import math

import pytest

from sim.cluster import containers, scripts, shell
from sim.cluster.scripts import Chunk, Growth


def program(command: list[str], args: list[str] | None = None) -> scripts.Program:
    return scripts.read({"command": command, "args": args or []})


def script(text: str) -> scripts.Program:
    return program(["/bin/sh", "-c", text])


@pytest.mark.parametrize(
    ("text", "chunks"),
    [
        ("echo hello world", [(0, "stdout", "hello world\n")]),
        ("echo -n no newline", [(0, "stdout", "no newline")]),
        ("echo -e 'a\\tb'", [(0, "stdout", "a\tb\n")]),
        ("echo 'a\\nb'", [(0, "stdout", "a\\nb\n")]),
        ("echo \"semi; colon\" '&& and'", [(0, "stdout", "semi; colon && and\n")]),
        ("echo oops >&2", [(0, "stderr", "oops\n")]),
        ("echo oops 1>&2", [(0, "stderr", "oops\n")]),
        ("echo quiet > /dev/null; echo loud 2>/dev/null", [(0, "stdout", "loud\n")]),
        ("printf '%s=%d\\n' a 1 b 2", [(0, "stdout", "a=1\nb=2\n")]),
        ("printf '%5s|%-3d|%%\\n' x 7", [(0, "stdout", "    x|7  |%\n")]),
        ("seq 3", [(0, "stdout", "1\n2\n3\n")]),
        ("seq -w 8 10; seq 5 -2 1", [(0, "stdout", "08\n09\n10\n"), (0, "stdout", "5\n3\n1\n")]),
        ("seq -f 'step %g: ok' -s ' | ' 2", [(0, "stdout", "step 1: ok | step 2: ok\n")]),
        ("seq 5 1", []),
        (
            "seq 1.5 >&2",
            [(0, "stderr", "seq: invalid floating point argument: '1.5' (the sim reads integers only)\n")],
        ),
        ("echo $HOME", [(0, "stdout", "$HOME\n")]),
        ("echo a # a comment\necho b", [(0, "stdout", "a\n"), (0, "stdout", "b\n")]),
        (
            "echo one; sleep 2; echo two\nsleep 1m\necho three",
            [(0, "stdout", "one\n"), (2, "stdout", "two\n"), (62, "stdout", "three\n")],
        ),
    ],
)
def test_output_and_its_timing(text: str, chunks: list[tuple[float, str, str]]) -> None:
    assert script(text).chunks == tuple(Chunk(at, stream, out) for at, stream, out in chunks)


def test_seq_prints_long_output_from_a_short_command_up_to_its_cap() -> None:
    (chunk,) = program(["seq", "5000"]).chunks
    assert chunk.text.splitlines() == [str(n) for n in range(1, 5001)]
    (capped,) = script(f"seq {scripts.MAX_SEQ_NUMBERS * 2}").chunks
    assert capped.text.count("\n") == scripts.MAX_SEQ_NUMBERS
    assert script("seq x || echo refused").chunks[-1].text == "refused\n", "a refusal is status 1"


@pytest.mark.parametrize(
    ("text", "ends_at", "code", "printed"),
    [
        ("sleep 2; exit 3", 2.0, 3, ""),
        ("false", 0.0, 1, ""),
        ("false; echo after", 0.0, 0, "after\n"),
        ("false && echo no", 0.0, 1, ""),
        ("false || echo yes", 0.0, 0, "yes\n"),
        ("true && echo yes || echo no", 0.0, 0, "yes\n"),
        ("false && echo no || echo fallback", 0.0, 0, "fallback\n"),
        ("exit 300", 0.0, 44, ""),
        ("false; exit", 0.0, 1, ""),
        ("echo before; exit 7; echo never", 0.0, 7, "before\n"),
        ("set -e; export A=1; cd /tmp; :", 0.0, 0, ""),
    ],
)
def test_exit_status_and_connectors(text: str, ends_at: float, code: int, printed: str) -> None:
    result = script(text)
    assert (result.ends_at, result.exit_code) == (ends_at, code)
    assert "".join(c.text for c in result.chunks) == printed


@pytest.mark.parametrize(
    ("command", "ends_at", "busy", "sigterm"),
    [
        (["sleep", "5"], 5.0, False, True),
        (["sleep", "infinity"], None, False, True),
        (["python", "train.py"], None, True, False),
        (["sh", "-c", "echo start; python train.py; echo never"], None, True, False),
        (["bash", "-c", "sleep 3600"], 3600.0, False, False),
        (["sh", "-c", 'echo "unterminated'], None, True, False),
        ([], None, True, False),
    ],
)
def test_how_long_it_runs_and_whether_it_uses_the_gpu(
    command: list[str], ends_at: float | None, busy: bool, sigterm: bool
) -> None:
    result = program(command)
    assert (result.ends_at, result.busy, result.ignores_sigterm) == (ends_at, busy, sigterm)


@pytest.mark.parametrize(
    ("command", "args", "growth"),
    [
        (["sh", "-c", "echo start; tail /dev/zero"], [], Growth(0.0, math.inf)),
        (["sh", "-c", "sleep 3; cat /dev/zero | tail"], [], Growth(3.0, math.inf)),
        (["sh", "-c", "tail < /dev/zero"], [], Growth(0.0, math.inf)),
        (["tail", "/dev/zero"], [], Growth(0.0, math.inf)),
        (["stress"], ["--vm", "1", "--vm-bytes", "250M", "--vm-hang", "1"], Growth(0.0, 250 * 2**20)),
        (["stress-ng"], ["--vm", "2", "--vm-bytes", "1G"], Growth(0.0, 2 * 2**30)),
        (["sh", "-c", "tail -f /dev/null"], [], None),
        (["sh", "-c", "tail -c 10 /dev/zero"], [], None),
    ],
)
def test_memory_growth(command: list[str], args: list[str], growth: Growth | None) -> None:
    assert program(command, args).growth == growth


def test_growth_past_the_cap_is_an_oom_kill_at_the_rate() -> None:
    container = {"command": ["sh", "-c", "echo start; sleep 2; tail /dev/zero"]}
    killed = containers.behaviour(container, memory_cap=64 * 2**20, growth_rate=2**30)
    assert (killed.runs_for, killed.exit_code, killed.reason) == (2.0 + 1 / 16, 137, "OOMKilled")
    assert containers.behaviour(container).runs_for is None, "without a cap it runs on"


def test_bounded_growth_within_the_cap_keeps_running() -> None:
    container = {"command": ["stress"], "args": ["--vm", "1", "--vm-bytes", "150M", "--timeout", "60s"]}
    within = containers.behaviour(container, memory_cap=200 * 2**20, growth_rate=2**30)
    assert (within.runs_for, within.exit_code, within.reason) == (60.0, 0, "Completed")
    over = containers.behaviour(container, memory_cap=100 * 2**20, growth_rate=2**30)
    assert over.reason == "OOMKilled" and over.runs_for is not None and over.runs_for < 1


def test_tokens_keep_quotes_apart_from_operators() -> None:
    assert shell.tokenize('echo \'a;b\' "c\\"d" e\\ f && x || y | z 2>&1 >out') == [
        ("word", "echo"),
        ("word", "a;b"),
        ("word", 'c"d'),
        ("word", "e f"),
        ("op", "&&"),
        ("word", "x"),
        ("op", "||"),
        ("word", "y"),
        ("op", "|"),
        ("word", "z"),
        ("redirect", "2>&1"),
        ("redirect", "1>out"),
    ]
