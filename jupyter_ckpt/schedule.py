"""When to checkpoint: the policy, the overhead budget, the lag, and whether the kernel is idle.

A checkpoint forks the kernel, and while the child writes, every page the next
cells touch is copied and, on few cores, the child takes CPU from them: the
fork, that copy-on-write tax and the child's CPU are the cost. The default
policy spends them where nobody waits:

- a cell followed by ``grace`` seconds of idle gets its own checkpoint, taken
  then, after the reply, so the user never waits for it;
- cells that arrive back to back (Run All, nbclient, papermill) start before
  that grace ends. The previous cell's state is then checkpointed as the next
  cell starts only if the budget can pay for it: what checkpoints have cost so
  far (counting what writers still running have cost), plus what this one is
  expected to cost (the last one's whole cost, or before any was measured a
  prior the Checkpointer gives), must stay within ``budget`` (a fraction of the
  execution time seen), and the last fork must have taken at most
  ``max_pause``; otherwise the boundary is skipped and the reason counted. A
  run of short cells therefore pays for no fork until enough execution has
  accumulated to cover one;
- whatever the budget, checkpoints are never more than ``max_lag`` seconds of
  execution apart: a boundary checkpoints at once if another cell as long as the
  one that just ended would take the newest checkpoint past ``max_lag`` (a cell
  longer than ``max_lag`` is one boundary to the next: a checkpoint is never
  taken inside a cell, except by ``here()``).

``every`` forces a checkpoint after every Nth cell, whatever it costs, and
``interval`` once that many seconds have passed (at a cell boundary, or by itself
when idle): the policy the user asked for, with no budget.

The scheduler takes no checkpoint itself and reads time only through the clock
it is given: the Checkpointer asks it at each moment (a cell ended, a cell
starts, an idle tick) and tells it what a checkpoint cost. Tests drive it with
their own clock and costs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# Why a cell boundary was not checkpointed.
OVER_BUDGET, SLOW_FORK = "back to back, over the overhead budget", "back to back, the last fork was too slow"


@dataclass
class Scheduler:
    """Decides, moment by moment, whether the namespace is checkpointed now."""

    budget: float = 0.03
    max_lag: float = 60.0
    grace: float = 0.25
    max_pause: float = 0.02
    clock: Callable[[], float] = time.monotonic
    executed: float = 0.0  # seconds of cell execution seen
    spent: float = 0.0  # seconds charged to checkpoints: forks, and the writers' cost (the Checkpointer's charge)
    lag: float = 0.0  # seconds of execution since the state of the newest checkpoint
    last_fork: float = 0.0  # how long the last fork held the kernel
    expected: float = 0.0  # what the next checkpoint is expected to cost: the last one's, or the prior
    measured: bool = False  # whether ``expected`` comes from a checkpoint of this kernel
    owed: int | None = None  # the cell whose end state is not checkpointed yet
    skipped: Counter[str] = field(default_factory=Counter)
    _ended_at: float = 0.0

    def ran(self, duration: float) -> None:
        """A cell ran this long: execution seen, and the newest checkpoint that much further behind."""
        self.executed += duration
        self.lag += duration

    def cell_finished(self, count: int | None, duration: float) -> bool:
        """A cell ended: whether to checkpoint at this boundary, whatever the budget, to keep within ``max_lag``.

        The next cell's length is not known: it is taken to be this one's, so
        under a Run All of cells shorter than ``max_lag`` no two checkpoints are
        more than ``max_lag`` of execution apart. Otherwise the cell is owed a
        checkpoint, taken when the kernel goes idle or as the next cell starts.
        """
        self.ran(duration)
        self._ended_at = self.clock()
        if self.owed is not None:  # a boundary that no cell start saw (a silent request ran between)
            self.skipped[self._why_not() or OVER_BUDGET] += 1
        self.owed = -1 if count is None else count
        return self.lag >= self.max_lag or self.lag + duration > self.max_lag

    def idle_due(self) -> bool:
        """Whether the kernel has been idle long enough after an owed cell to checkpoint it now."""
        return self.owed is not None and self.clock() - self._ended_at >= self.grace

    def cell_starting(self, accruing: float = 0.0) -> bool:
        """A cell starts before the owed one was checkpointed: whether to checkpoint it now, within budget.

        ``accruing`` is the cost of the children still writing, so far: charged only once they are
        done, it must count already, or under Run All a fork at every boundary spends the budget many
        times over before the first charge lands.
        """
        if self.owed is None:
            return False
        why = self._why_not(accruing)
        if why is None:
            return True
        self.skipped[why] += 1
        self.owed = None
        return False

    def _why_not(self, accruing: float = 0.0) -> str | None:
        if self.last_fork > self.max_pause:
            return SLOW_FORK
        if self.spent + accruing + self.expected > self.budget * self.executed:
            return OVER_BUDGET
        return None

    def taken(self, fork_seconds: float) -> None:
        """A checkpoint of the current state was taken; its fork held the kernel this long."""
        self.owed = None
        self.lag = 0.0
        self.last_fork = fork_seconds
        self.spent += fork_seconds

    def charge(self, seconds: float) -> None:
        """Add a cost seen after the fork: what its writer cost the cells (the kernel's system time, with its
        copy-on-write copies, and the writer's CPU time). With its fork, it is what the next one should cost."""
        self.spent += seconds
        self.expected = self.last_fork + seconds
        self.measured = True

    def prior(self, seconds: float) -> None:
        """What a checkpoint is expected to cost until one of this kernel's is measured."""
        if not self.measured:
            self.expected = seconds

    def report(self) -> dict[str, object]:
        """What ``%checkpoint status`` shows of the schedule."""
        return {
            "behind_s": round(self.lag, 3),
            "overhead": round(self.spent / self.executed, 4) if self.executed else 0.0,
            "spent_s": round(self.spent, 3),
            "executed_s": round(self.executed, 3),
            "skipped": dict(self.skipped),
        }
