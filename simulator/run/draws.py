"""The random failures of one run: the same numbers for the SimPy process and the vectorised model.

Run i of seed s draws from numpy's generator seeded (s, i), in blocks of BLOCK: BLOCK exponential
gaps (in units of the job's MTBF) then BLOCK uniforms that pick the failing class in proportion to its
rate. Superposed independent exponential clocks are one exponential clock of the summed rate whose
events belong to each class with probability rate / sum (the competing-risks property), so this is
the per-class draw, made in an order both implementations can share.
"""

from __future__ import annotations

import numpy as np

BLOCK = 64


def draw_block(rng: np.random.Generator, rate_per_s: float, cumulative: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gaps in up-time seconds, class indices) of the next BLOCK failures."""
    gaps = rng.standard_exponential(BLOCK) / rate_per_s if rate_per_s > 0 else np.full(BLOCK, np.inf)
    classes = np.searchsorted(cumulative, rng.random(BLOCK), side="right")
    return gaps, np.minimum(classes, len(cumulative) - 1)


def cumulative_shares(rates: list[float]) -> np.ndarray:
    """Cumulative share of each class in the job's failure rate (empty rates: one class that never fails)."""
    total = sum(rates)
    return np.cumsum(rates) / total if total > 0 else np.ones(1)


class RunDraws:
    """The failures of one run, one at a time (for the SimPy process)."""

    def __init__(self, seed: int, run: int, rate_per_s: float, cumulative: np.ndarray) -> None:
        self._rng = np.random.default_rng([seed, run])
        self._rate, self._cumulative = rate_per_s, cumulative
        self._gaps, self._classes = np.empty(0), np.empty(0, dtype=int)
        self._next = 0

    def next(self) -> tuple[float, int]:
        """(up-time seconds to the next failure, its class index)."""
        if self._next == len(self._gaps):
            self._gaps, self._classes = draw_block(self._rng, self._rate, self._cumulative)
            self._next = 0
        self._next += 1
        return float(self._gaps[self._next - 1]), int(self._classes[self._next - 1])
