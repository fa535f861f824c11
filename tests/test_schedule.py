"""When to checkpoint, on an injected clock and injected costs: no kernel, no sleeps."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_ckpt.schedule import OVER_BUDGET, SLOW_FORK, Scheduler


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scheduler(**options: Any) -> tuple[Scheduler, Clock]:
    clock = Clock()
    return Scheduler(clock=clock, **options), clock


def test_a_cell_followed_by_idle_is_checkpointed_once_the_grace_is_over() -> None:
    s, clock = scheduler(grace=0.25)
    assert s.cell_finished(1, duration=2.0) is False  # never at the boundary: the reply goes first
    assert not s.idle_due()
    clock.now += 0.3
    assert s.idle_due()
    s.taken(fork_seconds=0.01)
    assert not s.idle_due() and s.lag == 0.0


def test_back_to_back_cells_are_checkpointed_while_the_budget_allows_then_skipped() -> None:
    s, _ = scheduler(budget=0.03)
    s.cell_finished(1, duration=1.0)
    assert s.cell_starting() is True  # 10 ms of 1 s: within 3%
    s.taken(fork_seconds=0.01)
    s.charge(0.05)  # the pages copied while that child wrote
    s.cell_finished(2, duration=0.5)
    assert s.cell_starting() is False  # 60 ms spent of 1.5 s: over 3%
    assert s.skipped == {OVER_BUDGET: 1} and s.owed is None
    for count in range(3, 6):
        s.cell_finished(count, duration=0.1)
        s.cell_starting()
    assert s.skipped[OVER_BUDGET] == 4 and round(s.lag, 6) == 0.8
    s.cell_finished(6, duration=1.0)
    assert s.cell_starting() is False  # 60 ms spent and 60 ms expected (the last one's cost) of 2.8 s: not yet
    s.cell_finished(7, duration=1.3)
    assert s.cell_starting() is True  # 120 ms of 4.1 s: the budget pays for one again


def test_short_back_to_back_cells_pay_for_no_checkpoint_until_their_execution_covers_the_expected_cost() -> None:
    s, _ = scheduler(budget=0.03)
    s.prior(0.3)  # before any checkpoint of this kernel: a writer's pass over its memory
    taken = []
    for count in range(1, 21):
        s.cell_finished(count, duration=0.5)
        if s.cell_starting():
            taken.append(count)
            s.taken(fork_seconds=0.01)
    assert taken == [20]  # 0.3 s is 3% of 10 s: the first boundary after 10 s of execution
    s.charge(0.05)
    s.prior(0.3)  # a measured cost replaces the prior, which no longer counts
    assert s.expected == pytest.approx(0.06)


def test_the_cost_of_a_writer_still_running_counts_before_it_is_charged() -> None:
    s, _ = scheduler(budget=0.03)
    s.cell_finished(1, duration=1.0)
    assert s.cell_starting(accruing=0.05) is False  # 50 ms of copies so far, of 1 s: over 3%
    s.cell_finished(2, duration=1.0)
    assert s.cell_starting(accruing=0.01) is True


def test_a_slow_fork_is_never_paid_between_back_to_back_cells() -> None:
    s, _ = scheduler(max_pause=0.02)
    s.cell_finished(1, duration=100.0)
    s.taken(fork_seconds=0.03)
    s.cell_finished(2, duration=100.0)
    assert s.cell_starting() is False and s.skipped == {SLOW_FORK: 1}


def test_checkpoints_are_never_more_than_max_lag_of_execution_apart() -> None:
    s, _ = scheduler(max_lag=60.0, max_pause=0.0)  # back-to-back checkpoints never allowed
    at_boundary = []
    for count in range(1, 31):
        if s.cell_finished(count, duration=7.0):
            at_boundary.append(count)
            s.taken(fork_seconds=0.05)
        else:
            s.cell_starting()
        assert s.lag <= 60.0
    # Not at 63 s, past max_lag: at 56 s, when another 7 s cell would pass it.
    assert at_boundary == [8, 16, 24]


@pytest.mark.parametrize(
    ("durations", "at_boundary"),
    [
        ([20.0, 30.0, 5.0, 5.0], [2]),  # 50 s behind, and another 30 s cell would make 80
        ([45.0, 10.0, 2.0, 2.0], [1]),  # 45 + 45 > 60
        ([70.0, 70.0, 1.0], [1, 2]),  # a cell longer than max_lag: one boundary to the next
        ([10.0, 10.0, 10.0], []),  # 30 s behind, 40 s after another such cell
    ],
)
def test_the_boundary_checkpointed_is_the_last_before_a_cell_like_the_last_would_pass_max_lag(
    durations: list[float], at_boundary: list[int]
) -> None:
    s, _ = scheduler(max_lag=60.0, max_pause=0.0)
    taken = []
    for count, duration in enumerate(durations, start=1):
        if s.cell_finished(count, duration):
            taken.append(count)
            s.taken(fork_seconds=0.05)
        else:
            s.cell_starting()
    assert taken == at_boundary


def test_the_report_says_how_far_behind_and_why() -> None:
    s, _ = scheduler(max_pause=0.0)
    s.cell_finished(1, duration=2.0)
    s.taken(fork_seconds=0.01)
    s.cell_finished(2, duration=3.0)
    s.cell_starting()
    assert s.report() == {
        "behind_s": 3.0,
        "overhead": 0.002,
        "spent_s": 0.01,
        "executed_s": 5.0,
        "skipped": {SLOW_FORK: 1},
    }
