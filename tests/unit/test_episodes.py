"""Scale episodes, fed the exact strings the simulated autoscaler emits, in every order the watches allow."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.core import episodes, models, notices
from bot.core.episodes import NodeRemoved, PoolEvent, Seeded
from bot.core.lifecycle import EventSeen, NodeSeen
from bot.core.workloads import EventSubject
from sim.cluster import messages

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
POOL = "gpu-pool"
GROUP = (
    "https://www.googleapis.com/compute/v1/projects/demo/zones/local-a/instanceGroups/gke-demo-gpu-pool-grp"
)
NODE = "gke-demo-gpu-pool-ab12cd34-x1y2"
OTHER_NODE = "gke-demo-gpu-pool-ab12cd34-z9w8"
PRICE = 0.60
ALICE_POD = EventSubject("Pod", "default", "gpu-alice-1a2b3c", "uid-a")
BOB_POD = EventSubject("Pod", "default", "gpu-bob-4d5e6f", "uid-b")
STATUS_MAP = EventSubject("ConfigMap", "kube-system", "cluster-autoscaler-status", "uid-s")


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(
    seconds: int, reason: str, message: str, subject: EventSubject = ALICE_POD, owner: str = "alice"
) -> PoolEvent:
    return PoolEvent(EventSeen(at(seconds), reason, message), subject, owner)


def node_event(seconds: int, node: str, message: str) -> PoolEvent:
    return PoolEvent(EventSeen(at(seconds), "ScaleDown", message), EventSubject("Node", "", node, ""))


def triggered(
    seconds: int,
    old: int = 0,
    new: int = 1,
    *,
    max_size: int = 5,
    subject: EventSubject = ALICE_POD,
    owner: str = "alice",
) -> PoolEvent:
    message = messages.triggered_scale_up([messages.scale_up_info(GROUP, old, new, max_size)])
    return event(seconds, "TriggeredScaleUp", message, subject, owner)


def node(seconds: int, name: str = NODE, *, ready: bool = False, gpus: int = 0) -> NodeSeen:
    return NodeSeen(name, ready=ready, gpus=gpus, pool=POOL, at=at(seconds))


def feed(observations: Iterable[episodes.Observation], since: int = 0) -> episodes.Scales:
    state = episodes.start(at(since))
    for seen in observations:
        state, _ = episodes.advance(state, seen)
    return state


def notice(state: episodes.Scales, pool: str = POOL, *, now: int = 3600) -> notices.ChannelEpisode:
    episode = state.pool(pool).episode
    assert episode is not None
    return episodes.to_notice(episode, now=at(now), price_per_hour=PRICE)


# The seed's story as the two watches see it: events (left) and nodes (right) each in their own order.
EVENTS: list[episodes.Observation] = [
    triggered(30),
    node_event(1020, NODE, messages.SCALE_DOWN_MARKED),
    node_event(1020, NODE, messages.SCALE_DOWN_REMOVED),
]
NODES: list[episodes.Observation] = [
    node(120),
    node(150, ready=True),
    node(270, ready=True, gpus=1),
    NodeRemoved(at(1021), NODE, POOL),
]
STORY = [*EVENTS[:1], *NODES[:3], *EVENTS[1:], *NODES[3:]]
STORY_LINES = (
    "scale-up triggered for alice's gpu-alice-1a2b3c (gpu-pool 0→1)",
    f"node {NODE} joined after 1m30s",
    f"node {NODE} Ready after 2m00s",
    f"scale-down: node {NODE} removed",
    "pool at 0 — episode 16m30s, 0.25 GPU-hours, ≈ $0.15",
)


def interleavings(
    left: Sequence[episodes.Observation], right: Sequence[episodes.Observation]
) -> Iterable[list[episodes.Observation]]:
    """Every merge of two streams that keeps each stream's own order, as two informer threads deliver."""
    total = len(left) + len(right)
    for picks in itertools.combinations(range(total), len(left)):
        lefts, rights = iter(left), iter(right)
        yield [next(lefts) if i in picks else next(rights) for i in range(total)]


def test_the_seed_story_walks_through_one_episode() -> None:
    revisions = [notice(feed(EVENTS[:1] + NODES[:n])) for n in range(4)]
    assert [r.headline for r in revisions] == [
        "scaling up to 1: waiting for a node",
        "scaling up: 1 node joining, not Ready yet",
        "1 node Ready",
        "1 node Ready",
    ]
    assert revisions[0].lines == STORY_LINES[:1]
    assert revisions[2].lines == STORY_LINES[:3]
    final = notice(feed(STORY))
    assert final == notices.ChannelEpisode(
        pool=POOL, headline="back at 0 nodes", lines=STORY_LINES, closed=True
    )


def orders() -> Iterable[list[episodes.Observation]]:
    """The two watches may lag each other, but not by a whole scale-up: the node's removal events come
    after the node watch saw it Ready."""
    for up in interleavings(EVENTS[:1], NODES[:3]):
        for down in interleavings(EVENTS[1:], NODES[3:]):
            yield up + down


def test_any_interleaving_of_the_two_watches_tells_the_same_story() -> None:
    finals = {notice(feed(order)) for order in orders()}
    assert len(finals) == 1
    assert finals.pop().lines == STORY_LINES


def test_a_removal_seen_before_its_event_is_dated_by_the_event() -> None:
    late = [*EVENTS[:1], *NODES[:3], NodeRemoved(at(1500), NODE, POOL), *EVENTS[1:]]
    early = feed(late[:-1])
    assert notice(early).lines[-1] == "pool at 0 — episode 24m30s, 0.38 GPU-hours, ≈ $0.23"
    assert notice(feed(late)).lines == STORY_LINES


def test_one_episode_key_from_first_change_to_close() -> None:
    for order in orders():
        state, keys = episodes.start(T0), set()
        for seen in order:
            state, _ = episodes.advance(state, seen)
            episode = state.pool(POOL).episode
            keys |= {episode.key} if episode is not None else set()
        assert len(keys) == 1, order


@pytest.mark.parametrize(
    ("later", "why"),
    [
        (triggered(30), "the same event again (a MODIFIED repeat or a relist)"),
        (node(150, ready=True), "a heartbeat of a node already Ready"),
        (event(60, "FailedScheduling", "0/3 nodes are available: 1 Insufficient nvidia.com/gpu."), "noise"),
        (event(40, "NotTriggerScaleUp", messages.not_triggered_scale_up(["Too many pods"])), "other reasons"),
        (node_event(200, "gke-demo-default-pool-1", messages.SCALE_DOWN_REMOVED), "a node of no episode"),
    ],
)
def test_observations_that_change_nothing(later: episodes.Observation, why: str) -> None:
    state = feed([triggered(30), node(120), node(150, ready=True)])
    after, changed = episodes.advance(state, later)
    assert (changed, after) == (False, state), why


def test_events_from_before_the_start_are_history() -> None:
    state = feed([triggered(30)], since=60)
    assert state.pool(POOL).episode is None


def test_a_repeat_of_a_finished_episodes_trigger_opens_nothing() -> None:
    state = feed([*STORY, triggered(30)])
    episode = state.pool(POOL).episode
    assert episode is not None and episode.closed and episode.closed_at == at(1020)


def test_a_new_trigger_after_the_close_opens_a_new_episode() -> None:
    first = feed(STORY)
    second = feed([*STORY, triggered(2000)])
    old, new = first.pool(POOL).episode, second.pool(POOL).episode
    assert old is not None and new is not None
    assert new.key != old.key and not new.closed and new.started_at == at(2000)


def test_a_node_seen_before_its_trigger_belongs_to_the_triggered_episode() -> None:
    state = feed([node(120), triggered(30), node(150, ready=True)])
    episode = state.pool(POOL).episode
    assert episode is not None and episode.started_at == at(30)
    assert notice(state).lines == STORY_LINES[:3]


def test_a_node_with_no_scale_up_event_starts_an_episode() -> None:
    state = feed([node(100), node(130, ready=True), NodeRemoved(at(700), NODE, POOL)])
    assert notice(state).lines == (
        f"node {NODE} joined",
        f"node {NODE} Ready after 30s",
        f"scale-down: node {NODE} removed",
        "pool at 0 — episode 10m00s, 0.00 GPU-hours, ≈ $0.10",
    )


def test_a_second_node_counts_its_own_wait_and_the_pool_closes_after_the_last() -> None:
    state = feed(
        [
            *EVENTS[:1],
            *NODES[:3],
            triggered(600, 1, 2, subject=BOB_POD, owner="bob"),
            node(700, OTHER_NODE),
            node(760, OTHER_NODE, ready=True, gpus=1),
            NodeRemoved(at(1021), NODE, POOL),
        ]
    )
    shown = notice(state)
    assert shown.headline == "scaling down: 1 node left" and not shown.closed
    assert shown.lines[3:6] == (
        "scale-up triggered for bob's gpu-bob-4d5e6f (gpu-pool 1→2)",
        f"node {OTHER_NODE} joined after 1m40s",
        f"node {OTHER_NODE} Ready after 2m40s",
    )
    state, _ = episodes.advance(state, NodeRemoved(at(1800), OTHER_NODE, POOL))
    assert notice(state).lines[-1] == "pool at 0 — episode 29m30s, 0.56 GPU-hours, ≈ $0.33"


MAX_SIZE = messages.not_triggered_scale_up([messages.MAX_NODE_GROUP_SIZE_REACHED])
BACKOFF = messages.not_triggered_scale_up([messages.IN_BACKOFF])


@pytest.mark.parametrize(
    ("warning_event", "warning", "closes"),
    [
        (
            event(80, "NotTriggerScaleUp", MAX_SIZE, BOB_POD, "bob"),
            "max size reached: gpu-pool is at its maximum of 1 node; bob's gpu-bob-4d5e6f waits for a GPU to "
            "free up",
            False,
        ),
        (
            event(80, "FailedScaleUp", messages.gke_failed_scale_up("local-a")),
            "scale-up of gpu-pool failed: GCE out of resources",
            False,
        ),
        (
            event(
                80,
                "FailedToScaleUpGroup",
                messages.failed_to_scale_up(GROUP, messages.STOCKOUT_MESSAGE),
                STATUS_MAP,
            ),
            f"scale-up of gpu-pool failed: {messages.STOCKOUT_MESSAGE}",
            False,
        ),
        (
            event(930, "ScaleUpTimedOut", messages.scale_up_timed_out(GROUP, 900), STATUS_MAP),
            "provisioning timed out: no node joined gpu-pool within 15m0s; the autoscaler backs off and "
            "retries",
            True,
        ),
    ],
)
def test_warnings(warning_event: PoolEvent, warning: str, closes: bool) -> None:
    state = feed([triggered(30, max_size=1), warning_event])
    shown = notice(state)
    assert shown.warning == warning
    assert shown.closed is closes
    if closes:
        assert shown.headline == "scale-up ended with no node"


def test_a_timeout_then_backoff_closes_the_attempt_and_a_retry_is_a_new_episode() -> None:
    state = feed([triggered(30), event(940, "NotTriggerScaleUp", BACKOFF)])
    shown = notice(state)
    assert shown.closed
    assert shown.warning == (
        "scale-up of gpu-pool failed; the autoscaler backs off (up to 30m) before it retries"
    )
    retried = feed([triggered(30), event(940, "NotTriggerScaleUp", BACKOFF), triggered(1300)])
    episode = retried.pool(POOL).episode
    assert episode is not None and not episode.closed and episode.started_at == at(1300)


def test_any_late_observation_warns_of_an_overdue_node_once() -> None:
    noise = event(900, "FailedScheduling", "0/3 nodes are available: 1 Insufficient nvidia.com/gpu.")
    state = feed([triggered(30), noise])
    assert notice(state).warning == ""
    state = feed([triggered(30), noise, event(931, "FailedScheduling", "again"), node(1000)])
    assert notice(state).warning == (
        "provisioning is slow: no node has joined gpu-pool 15m00s after the scale-up"
    )


def test_pods_held_up_by_the_max_size_share_one_warning() -> None:
    state = feed(
        [
            triggered(30, max_size=1),
            triggered(30, max_size=1, subject=BOB_POD, owner="bob"),
            event(40, "NotTriggerScaleUp", MAX_SIZE, BOB_POD, "bob"),
            event(50, "NotTriggerScaleUp", MAX_SIZE, EventSubject("Pod", "default", "train-3", ""), ""),
            event(350, "NotTriggerScaleUp", MAX_SIZE, BOB_POD, "bob"),
        ]
    )
    shown = notice(state)
    assert shown.lines == (
        "scale-up triggered for alice's gpu-alice-1a2b3c (gpu-pool 0→1)",
        "scale-up triggered for bob's gpu-bob-4d5e6f (gpu-pool 0→1)",
    )
    assert shown.warning == (
        "max size reached: gpu-pool is at its maximum of 1 node; bob's gpu-bob-4d5e6f, train-3 wait for a "
        "GPU to free up"
    )


def test_a_held_up_pod_that_gets_a_gpu_is_no_longer_said_to_wait() -> None:
    train3 = EventSubject("Pod", "default", "train-3", "")
    held = [
        triggered(30, max_size=1),
        event(40, "NotTriggerScaleUp", MAX_SIZE, BOB_POD, "bob"),
        event(50, "NotTriggerScaleUp", MAX_SIZE, train3, ""),
    ]
    scheduled = "Successfully assigned default/gpu-bob-4d5e6f to " + NODE
    state = feed([*held, event(280, "Scheduled", scheduled, BOB_POD, "bob")])
    assert notice(state).warning == (
        "max size reached: gpu-pool is at its maximum of 1 node; train-3 waits for a GPU to free up; "
        "bob's gpu-bob-4d5e6f got one 4m00s later"
    )
    state = feed(
        [*held, event(280, "Scheduled", scheduled, BOB_POD, "bob"), event(400, "Scheduled", "", train3, "")]
    )
    assert notice(state).warning == (
        f"max size reached at {notices.clock_time(at(40))}: gpu-pool was at its maximum of 1 node; "
        "bob's gpu-bob-4d5e6f got a GPU 4m00s later; train-3 got a GPU 5m50s later"
    )


def test_a_closed_episode_says_its_max_size_wait_in_the_past() -> None:
    episode = feed(STORY).pool(POOL).episode
    assert episode is not None and episode.closed
    warned = replace(
        episode, warnings=(episodes.ScaleWarning(at(40), "max_size", "default/b", who="bob's b"),)
    )
    shown = episodes.to_notice(warned, now=at(3600), price_per_hour=PRICE)
    assert "waits" not in shown.warning
    assert shown.warning.endswith("gpu-pool was at its maximum of 5 nodes; bob's b waited for a GPU")


def test_warnings_without_an_episode_open_nothing() -> None:
    state = feed([event(80, "NotTriggerScaleUp", MAX_SIZE), event(90, "FailedScaleUp", "failed: x.")])
    assert state.pools == {}


DEFAULT_NODES = tuple(
    NodeSeen(f"gke-demo-default-pool-{i}", ready=True, gpus=0, pool="default-pool", at=at(0)) for i in (1, 2)
)


def test_seeded_nodes_without_gpus_are_no_episode() -> None:
    state = feed(
        [Seeded(at(0), DEFAULT_NODES), NodeSeen("gke-demo-default-pool-1", True, 0, "default-pool", at=at(5))]
    )
    assert state.pool("default-pool").episode is None
    assert state.pool("default-pool").present == {"gke-demo-default-pool-1", "gke-demo-default-pool-2"}


def test_a_restart_mid_episode_resumes_in_a_fresh_message() -> None:
    up = node(500, ready=True, gpus=1)
    state = feed([Seeded(at(500), (*DEFAULT_NODES, up)), triggered(30), node(510, ready=True, gpus=1)])
    shown = notice(state)
    assert shown.headline == "1 node Ready"
    assert shown.lines == ("resumed after a gpubot restart with 1 node up",)
    state, _ = episodes.advance(state, NodeRemoved(at(1100), NODE, POOL))
    assert notice(state).lines[-1] == (
        "pool at 0 — episode 10m00s since the restart, 0.17 GPU-hours, ≈ $0.10"
    )


def test_a_seeded_node_resumes_once_its_gpus_show() -> None:
    state = feed([Seeded(at(500), (node(500, ready=True),)), node(600, ready=True, gpus=1)])
    episode = state.pool(POOL).episode
    assert episode is not None and episode.resumed and episode.started_at == at(600)


def test_an_unknown_price_says_so() -> None:
    episode = feed(STORY).pool(POOL).episode
    assert episode is not None
    shown = episodes.to_notice(episode, now=at(3600), price_per_hour=None)
    assert shown.lines[-1] == (
        "pool at 0 — episode 16m30s, 0.25 GPU-hours, cost unknown (no profile prices this pool)"
    )


T4 = models.GpuProfile(name="t4", node_selector=(("app-type", "gpu-workloads"),), price_per_hour=0.54)
A100 = models.GpuProfile(name="a100", node_selector=(("app-type", "a100"),), price_per_hour=3.67)
FREE = models.GpuProfile(name="free", node_selector=(("app-type", "gpu-workloads"),))
ANY = models.GpuProfile(name="any", price_per_hour=9.0)


@pytest.mark.parametrize(
    ("node_labels", "profiles", "price"),
    [
        ({"app-type": "gpu-workloads", "cloud.google.com/gke-nodepool": POOL}, [A100, T4], 0.54),
        ({"app-type": "a100"}, [T4, A100], 3.67),
        ({"app-type": "gpu-workloads"}, [FREE], None),
        ({"cloud.google.com/gke-nodepool": "default-pool"}, [T4, A100, ANY], None),
        ({}, [], None),
    ],
)
def test_pool_price(
    node_labels: dict[str, str], profiles: list[models.GpuProfile], price: float | None
) -> None:
    assert episodes.pool_price(node_labels, profiles) == price


def test_a_leftover_trigger_of_an_earlier_episode_stays_out_of_the_next() -> None:
    relisted = feed([*STORY, triggered(2000, subject=BOB_POD, owner="bob"), triggered(30)])
    assert notice(relisted).lines == ("scale-up triggered for bob's gpu-bob-4d5e6f (gpu-pool 0→1)",)


def test_a_trigger_delivered_after_its_node_closed_the_episode_still_joins_it() -> None:
    state = feed([*NODES, triggered(30)])
    episode = state.pool(POOL).episode
    assert episode is not None and episode.started_at == at(30)
    assert notice(state).lines[:3] == STORY_LINES[:3]
