"""`/gpu logs`' answer: what the ephemeral shows, and when the whole answer goes as a file (pure rule, then
the service with an in-memory chat whose upload succeeds or fails as told, and the real renderer's fit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from bot.adapters import slack_render
from bot.core import errors, notices, workloads
from bot.services import logs

WORKLOAD = workloads.Workload(
    name="train-1",
    namespace="ml",
    uid="u1",
    owner_id="U_ALICE",
    requester_name="alice",
    profile="t4",
    channel="C_GPU",
    thread_ts=None,
    lease_end=None,
    requested_at=None,
    gpus=1,
    phase="Running",
    node="gpu-1",
    command="/gpu run x",
    deletion_requested=False,
)


def fits_in(characters: int) -> logs.Fits:
    return lambda lines: sum(len(line) + 1 for line in lines) <= characters


@pytest.mark.parametrize(
    ("count", "width", "shown", "file"),
    [
        (1, 10, 1, False),
        (50, 10, 50, False),  # a screen that fits: no file
        (51, 10, 50, True),  # one line past a screen
        (50, 99, 30, True),  # a screen of wide lines: the last 30 fit in 3,000
        (5000, 4, 50, True),
        (1, 5000, 1, True),  # one line too long to show whole
    ],
)
def test_the_excerpt_is_the_last_screen_that_fits_and_a_file_carries_the_rest(
    count: int, width: int, shown: int, file: bool
) -> None:
    lines = [f"{n:0{width}d}"[-width:] for n in range(count)]
    excerpt, needs_file = logs.plan_excerpt(lines, fits_in(3000))
    assert (len(excerpt), needs_file) == (shown, file)
    assert list(excerpt) == lines[-shown:]


@dataclass
class Cluster:
    output: str

    def read_log(self, namespace: str, name: str, *, tail_lines: int, previous: bool = False) -> str:
        return "".join(self.output.splitlines(keepends=True)[-tail_lines:])


@dataclass
class Chat:
    refusal: errors.GpubotError | None = None
    files: list[tuple[str, str, str, str]] = field(default_factory=list)

    def upload(
        self, user: str, filename: str, content: str, *, comment: str, timeout: float | None = None
    ) -> str:
        if self.refusal is not None:
            raise self.refusal
        self.files.append((user, filename, content, comment))
        return "F1"


def answer(output: str, tail: int, chat: Chat) -> notices.Ephemeral:
    service = logs.Logs(
        cast(Any, Cluster(output)), cast(Any, chat), cast(Any, None), fits=slack_render.code_block_fits
    )
    return service.answer(WORKLOAD, tail, reader="U_ADMIN")


def test_a_long_answer_goes_whole_to_the_readers_dms() -> None:
    output = "".join(f"step {n}\n" for n in range(1, 5001))
    chat = Chat()
    said = answer(output, 5000, chat)
    assert chat.files == [
        ("U_ADMIN", "train-1.log", output, "The output of `train-1` (Running): its last 5,000 lines.")
    ]
    assert said.text.startswith("The last 50 of 5,000 lines of `train-1` (Running): More: `kubectl logs")
    assert said.text.endswith("All 5,000 lines went to your DMs as a file, `train-1.log`.")
    assert said.output == tuple(f"step {n}" for n in range(4951, 5001))


def test_a_short_answer_sends_no_file() -> None:
    chat = Chat()
    said = answer("a\nb\n", 50, chat)
    assert not chat.files and said == notices.Ephemeral(
        "The last 2 lines of `train-1` (Running):", ("a", "b")
    )


@pytest.mark.parametrize(
    "refusal",
    [
        errors.Invalid("Slack: missing_scope"),
        errors.Unavailable("Slack file to U_ADMIN not sent within 20 s"),
    ],
)
def test_a_file_slack_refuses_still_leaves_the_excerpt_and_the_way_to_read_the_rest(
    refusal: errors.GpubotError,
) -> None:
    output = "".join(f"step {n}\n" for n in range(1, 201))
    said = answer(output, 300, Chat(refusal=refusal))
    assert said.output == tuple(f"step {n}" for n in range(151, 201))
    assert f"I could not send all 200 lines as a file ({refusal})." in said.text
    assert said.text.endswith("Read them with `kubectl logs -n ml train-1 --tail 300`")
