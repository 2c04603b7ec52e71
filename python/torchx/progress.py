"""How far a group of jobs is, for the callbacks of ``Runner.wait`` and
``torchx.futures.Executor.map``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from torchx.specs import AppState, is_terminal

__all__ = ["Progress"]


@dataclass(frozen=True)
class Progress:
    """How far a group (or a ``torchx.futures`` map) is: the number of tasks per state, how
    many are over, the seconds since the wait began and, once some are over, an estimate of
    the seconds left at the pace so far. What ``torchx run --wait`` shows, for a callback."""

    total: int
    done: int
    counts: Dict[str, int]
    elapsed: float
    eta: Optional[float]

    @staticmethod
    def of(states: Sequence[AppState], elapsed: float) -> Progress:
        counts: Dict[str, int] = {}
        for s in states:
            counts[s.name] = counts.get(s.name, 0) + 1
        done = sum(1 for s in states if is_terminal(s))
        eta = elapsed * (len(states) - done) / done if 0 < done < len(states) else None
        return Progress(total=len(states), done=done, counts=counts, elapsed=elapsed, eta=eta)
