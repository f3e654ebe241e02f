"""Max-min fair bandwidth sharing by progressive filling (Bertsekas & Gallager, Data Networks, 6.5.2).

All unfrozen flows' rates rise together from 0. When a resource r saturates,
sum_f usage[f, r] * rate[f] = capacity[r], every flow that uses r is frozen at the current level;
a flow also freezes when it reaches its own rate cap. Repeat until every flow is frozen. The result
is the unique max-min fair allocation: every flow has a bottleneck, either its cap or a saturated
resource on which no other flow has a higher rate.

Cost: each round is a few vectorised passes (numpy bincount/gather) over the non-zeros of the flows
still free (frozen flows' entries are dropped), and each round freezes at least one bottleneck
level, so the total is O(rounds x nnz) with rounds <= the number of distinct bottleneck levels
(<= resources + capped flows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator.network.flows import NetworkError

# Resources whose fill level is within this relative distance of the current level saturate
# together: it merges ties broken only by rounding into one round.
LEVEL_RTOL = 1e-12


def _as_coo(usage: Any, n_flows: int, n_resources: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, values) of the positive entries of a dense array or scipy sparse matrix/array (known by
    its `tocoo`: scipy costs a third of a second to import, and the engine itself never passes one)."""
    matrix = usage.tocoo() if hasattr(usage, "tocoo") else np.asarray(usage, dtype=float)
    if matrix.shape != (n_flows, n_resources):
        raise NetworkError(f"usage has shape {matrix.shape}, expected ({n_flows}, {n_resources})")
    if isinstance(matrix, np.ndarray):
        rows, cols = np.nonzero(matrix)
        vals = matrix[rows, cols]
    else:
        rows, cols, vals = matrix.row, matrix.col, np.asarray(matrix.data, dtype=float)
    if not np.all(np.isfinite(vals) & (vals >= 0.0)):
        raise NetworkError("usage coefficients must be finite and >= 0")
    keep = vals > 0.0
    return rows[keep].astype(np.intp), cols[keep].astype(np.intp), vals[keep]


def max_min_rates(
    capacity_Bps: np.ndarray,
    usage: Any,
    active: np.ndarray,
    rate_cap_Bps: np.ndarray | None = None,
) -> np.ndarray:
    """Max-min fair per-flow rates (bytes/s) under sum_f usage[f, r] * rate[f] <= capacity_Bps[r].

    `usage` is a dense (F, R) array or a scipy.sparse matrix/array of coefficients >= 0; `active`
    selects the flows that take part (inactive flows get rate 0); `rate_cap_Bps` (F,) bounds each
    flow's rate (np.inf = no cap). A flow on a zero-capacity resource gets rate 0 (the caller must
    treat that as a stall). An active flow with no usage and no cap gets rate np.inf: nothing
    limits it, so callers should give such flows a cap. Deterministic: no randomness, no hashing.
    """
    capacity = np.asarray(capacity_Bps, dtype=float)
    if capacity.ndim != 1 or not np.all(np.isfinite(capacity) & (capacity >= 0.0)):
        raise NetworkError("capacity_Bps must be a 1-D array of finite values >= 0")
    active_mask = np.asarray(active, dtype=bool)
    n_flows, n_resources = active_mask.shape[0], capacity.shape[0]
    limit = np.full(n_flows, np.inf) if rate_cap_Bps is None else np.asarray(rate_cap_Bps, dtype=float)
    if limit.shape != (n_flows,) or np.any(np.isnan(limit) | (limit < 0.0)):
        raise NetworkError(f"rate_cap_Bps must be ({n_flows},) values >= 0 (np.inf for no cap)")
    rows, cols, vals = _as_coo(usage, n_flows, n_resources)
    return fill_rates(capacity, rows, cols, vals, limit, active_mask)


def fill_rates(
    capacity_Bps: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    limit_Bps: np.ndarray,
    active: np.ndarray,
) -> np.ndarray:
    """The progressive-filling kernel of `max_min_rates` on validated COO input (vals > 0).

    rows/cols/vals are the usage non-zeros (flow index, resource index, coefficient); limit_Bps is
    the per-flow cap (np.inf for none). The engine calls this directly to skip re-validation.
    """
    n_flows, n_resources = limit_Bps.shape[0], capacity_Bps.shape[0]
    on = active[rows]
    rows, cols, vals = rows[on], cols[on], vals[on]
    rate = np.zeros(n_flows)
    free = active.copy()
    frozen_load = np.zeros(n_resources)
    level = 0.0
    while free.any():
        # rows/cols/vals hold only the entries of free flows: each round drops the frozen ones.
        free_weight = np.bincount(cols, weights=vals, minlength=n_resources)
        # Level at which each resource with free users would saturate if all free flows rose together.
        fill = np.divide(
            capacity_Bps - frozen_load, free_weight, out=np.full(n_resources, np.inf), where=free_weight > 0.0
        )
        # Clamp: rounding can put a saturated resource's fill a hair below the current level.
        level = max(level, min(fill.min(initial=np.inf), limit_Bps.min(where=free, initial=np.inf)))
        if np.isinf(level):
            rate[free] = np.inf  # no resource and no cap limits these flows
            break
        threshold = level * (1.0 + LEVEL_RTOL)
        newly = free & (limit_Bps <= threshold)
        newly[rows[fill[cols] <= threshold]] = True
        rate[newly] = level
        free &= ~newly
        leaving = newly[rows]
        frozen_load += level * np.bincount(cols[leaving], weights=vals[leaving], minlength=n_resources)
        rows, cols, vals = rows[~leaving], cols[~leaving], vals[~leaving]
    return rate
