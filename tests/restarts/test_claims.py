"""The pure rules behind "nothing lost": an act's claim on the pod, a delete on record, the run journal, and
the journal of deletes not yet told."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters import store
from bot.core import models, podspec, reaping
from bot.services import pending, tellings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
POLICY = reaping.ReaperPolicy()
END = NOW + timedelta(minutes=10)
"""A lease ending in 10 minutes: the reminder is due."""


def due(**marks: datetime | None) -> reaping.Act | None:
    shown = reaping.Marks(**marks)
    candidate = reaping.Candidate(lease_end=END, finished_at=None, terminating=False, marks=shown)
    return reaping.decide(candidate, NOW, POLICY)


@pytest.mark.parametrize(
    ("claimed_ago", "act"),
    [
        (None, reaping.Act.REMIND),
        (timedelta(seconds=10), None),  # another round or replica is telling: wait for it
        (POLICY.telling_timeout - timedelta(seconds=1), None),
        (POLICY.telling_timeout, reaping.Act.REMIND),  # its replica died mid-act: decide again
    ],
)
def test_a_claim_holds_an_act_back_until_it_is_void(
    claimed_ago: timedelta | None, act: reaping.Act | None
) -> None:
    assert due(telling_since=None if claimed_ago is None else NOW - claimed_ago) is act


def test_a_reminder_marked_done_is_not_due_again() -> None:
    assert due(reminded_for=END) is None


def test_a_delete_on_record_is_finished_before_anything_else() -> None:
    candidate = reaping.Candidate(lease_end=NOW, finished_at=None, terminating=False, delete_recorded=True)
    assert reaping.decide(candidate, NOW, POLICY) is reaping.Act.FINISH_DELETE
    gone = reaping.Candidate(lease_end=NOW, finished_at=None, terminating=True, delete_recorded=True)
    assert reaping.decide(gone, NOW, POLICY) is None


@pytest.mark.parametrize(
    ("actions", "recorded"),
    [
        ([], False),
        (["run"], False),
        (["run", "release"], True),
        (["run", "reap"], True),
        (["release", "extend"], False),
    ],
)
def test_delete_recorded_reads_the_newest_audit_record(actions: list[str], recorded: bool) -> None:
    audit = podspec.audit_json([models.AuditEntry(action=a, actor="U1", at=NOW) for a in actions])
    assert podspec.delete_recorded(audit) is recorded


def test_delete_recorded_is_false_for_unreadable_audit() -> None:
    assert not podspec.delete_recorded("not json") and not podspec.delete_recorded('{"action": "release"}')


def test_the_request_key_is_a_stable_digest_that_hides_the_trigger_id() -> None:
    key = podspec.request_key("13345224609.738474920.8088930838d88f008e0")
    assert key == podspec.request_key("13345224609.738474920.8088930838d88f008e0") and len(key) == 20
    assert "13345224609" not in key and podspec.request_key("") == ""


def journal(replica: str, kept: store.MemoryStore) -> pending.Journal:
    return pending.Journal(kept, replica=replica)


def test_the_journal_keeps_a_run_until_it_is_done_and_round_trips_it() -> None:
    kept = store.MemoryStore()
    owner = models.Owner("U1", "alice", "T1")
    run = models.RunRequest(image="img", text="run img")
    accepted = journal("a", kept).accept("trig-1", run, owner, "C1", NOW)
    accepted = journal("a", kept).posted(accepted, "1.5")
    (back,) = [pending.read(k, v) for k, v in kept.entries(pending.TABLE).items()]
    assert back == accepted and back is not None and back.thread_ts == "1.5"
    journal("a", kept).done(accepted)
    assert kept.entries(pending.TABLE) == {}


def test_own_runs_are_resumed_at_once_and_another_replicas_only_once_it_is_gone() -> None:
    kept = store.MemoryStore()
    owner = models.Owner("U1", "alice", "T1")
    journal("a", kept).accept("trig-1", models.RunRequest(image="img", text="run img"), owner, "C1", NOW)
    assert journal("b", kept).due(NOW, at_start=True) == []
    assert journal("b", kept).due(NOW + pending.OTHERS_AFTER / 2, at_start=False) == []
    (mine,) = journal("a", kept).due(NOW, at_start=True)
    assert mine.request_id == "trig-1"
    assert journal("a", kept).due(NOW, at_start=True) == []  # claimed: no second round resumes it
    assert journal("b", kept).due(NOW + pending.OTHERS_AFTER, at_start=False) == []


def test_an_unreadable_journal_entry_is_dropped() -> None:
    kept = store.MemoryStore()
    kept.put(pending.TABLE, "trig-1", "{not json")
    assert journal("a", kept).due(NOW, at_start=False) == [] and kept.entries(pending.TABLE) == {}


def test_a_leaders_round_never_takes_its_own_runs_in_hand() -> None:
    """Its own runs are being carried out by its handlers; taking one would post a second thread root."""
    kept = store.MemoryStore()
    owner = models.Owner("U1", "alice", "T1")
    journal("a", kept).accept("trig-1", models.RunRequest(image="img", text="run img"), owner, "C1", NOW)
    assert journal("a", kept).due(NOW + pending.OTHERS_AFTER * 2, at_start=False) == []
    (gone,) = journal("b", kept).due(NOW + pending.OTHERS_AFTER, at_start=False)
    assert gone.request_id == "trig-1"


# -- the journal of deletes not yet told ------------------------------------------------------------------


def told(replica: str, *, at: datetime = NOW, refused: str = "") -> tellings.Telling:
    target = tellings.Target("expire", "default/train-1", "U1", "C1", "1.5")
    key = tellings.telling_key("uid-1", "expire")
    return tellings.Telling(key, target, ":wastebasket: Deleted", replica, at, refused)


def test_a_telling_round_trips_through_the_store_and_names_its_pod() -> None:
    kept = store.MemoryStore()
    telling = told("a", refused="not-member")
    tellings.Journal(kept, replica="a").keep(telling)
    (back,) = [tellings.read(k, v) for k, v in kept.entries(tellings.TABLE).items()]
    assert back == telling and telling.uid == "uid-1"
    tellings.Journal(kept, replica="a").drop(telling)
    assert kept.entries(tellings.TABLE) == {}


def test_own_tellings_are_due_every_round_and_another_replicas_once_it_is_gone() -> None:
    kept = store.MemoryStore()
    tellings.Journal(kept, replica="a").keep(told("a"))
    assert [t.replica for t in tellings.Journal(kept, replica="a").due(NOW, besides=set())] == ["a"]
    assert tellings.Journal(kept, replica="a").due(NOW, besides={told("a").key}) == []  # in hand already
    later = NOW + tellings.TAKEOVER_AFTER
    assert tellings.Journal(kept, replica="b").due(later - timedelta(seconds=1), besides=set()) == []
    (taken,) = tellings.Journal(kept, replica="b").due(later, besides=set())
    assert (taken.replica, taken.tried_at) == ("b", later)
    assert tellings.Journal(kept, replica="c").due(later, besides=set()) == []  # b holds it now
    (stored,) = [tellings.read(k, v) for k, v in kept.entries(tellings.TABLE).items()]
    assert stored is not None and stored.replica == "b"


def test_an_unreadable_telling_is_dropped() -> None:
    kept = store.MemoryStore()
    kept.put(tellings.TABLE, "uid-1:expire", "{not json")
    assert tellings.Journal(kept, replica="a").due(NOW, besides=set()) == []
    assert kept.entries(tellings.TABLE) == {}
