"""The outbox journal's entries and message keys, read back as kept and as Slack lists them."""

from __future__ import annotations

import pytest

from bot.adapters import outbox_journal


def test_an_entry_reads_back_as_kept() -> None:
    kept = outbox_journal.Entry(
        "k1", "post", ("chat", "C_GPU"), {"channel": "C_GPU", "text": "hi"}, 12.5, "r", "b1"
    )
    assert outbox_journal.read("r", "k1", kept.to_json()) == kept


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[]",
        '{"kind": "post", "lane": ["chat"], "args": [], "at": 1, "boot": "b"}',
        '{"kind": "post", "lane": ["chat"], "args": {}, "at": "soon", "boot": "b"}',
        '{"kind": "post", "lane": ["chat"], "args": {}, "at": 1}',
    ],
)
def test_an_unreadable_entry_reads_as_none(raw: str) -> None:
    assert outbox_journal.read("r", "k", raw) is None


@pytest.mark.parametrize(
    ("message", "key"),
    [
        ({"text": "hi", "metadata": outbox_journal.metadata("k1")}, "k1"),
        ({"text": "hi"}, ""),
        ({"metadata": {"event_type": "task_created", "event_payload": {"key": "k1"}}}, ""),
        ({"metadata": {"event_type": outbox_journal.EVENT_TYPE, "event_payload": "k1"}}, ""),
        ({"metadata": "k1"}, ""),
    ],
)
def test_only_gpubots_own_metadata_names_a_key(message: dict[str, object], key: str) -> None:
    assert outbox_journal.key_of(message) == key
