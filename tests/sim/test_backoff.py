"""The sim's back-offs (kubelet crash and pull loops, autoscaler node-group failures) share one formula."""

from sim.cluster.config import doubling


def test_it_doubles_up_to_the_cap() -> None:
    assert [doubling(10.0, 300.0, n) for n in range(7)] == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]


def test_a_crash_loop_running_for_simulated_weeks_stays_at_the_cap() -> None:
    """Uncapped, the exponent reaches 1,024 and the float overflows, killing the sim's loop."""
    assert doubling(10.0, 300.0, 100_000) == 300.0
