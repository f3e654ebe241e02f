"""Max-min fair sharing by progressive filling: hand-computed allocations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from simulator.network import NetworkError, max_min_rates

ALL4 = np.ones(4, dtype=bool)


def test_classic_three_links_four_flows() -> None:
    """Flow 0 crosses links A, B, C (capacities 1, 2, 3); flows 1, 2, 3 use one link each.

    A saturates first at 0.5 (two flows), freezing flows 0 and 1; flow 2 gets B's rest 2 - 0.5,
    flow 3 gets C's rest 3 - 0.5 (Bertsekas & Gallager's progressive filling).
    """
    usage = np.array([[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    rates = max_min_rates(np.array([1.0, 2.0, 3.0]), usage, ALL4)
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5, 2.5], rtol=1e-15)


def test_equal_capacities_give_equal_shares() -> None:
    """With unit capacities, every link of the classic example saturates at 1/2: all flows get 0.5."""
    usage = np.array([[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    rates = max_min_rates(np.ones(3), usage, ALL4)
    np.testing.assert_allclose(rates, [0.5, 0.5, 0.5, 0.5], rtol=1e-15)


def test_coefficients_weight_the_load() -> None:
    """A class with coefficient 3 on a 12 B/s link next to a coefficient-1 flow: 3x + x = 12, x = 3."""
    rates = max_min_rates(np.array([12.0]), np.array([[3.0], [1.0]]), np.ones(2, dtype=bool))
    np.testing.assert_allclose(rates, [3.0, 3.0], rtol=1e-15)


def test_rate_cap_freezes_flow_and_frees_capacity() -> None:
    """A flow capped at 2 B/s on a 10 B/s link next to an uncapped flow: rates 2 and 8."""
    rates = max_min_rates(
        np.array([10.0]), np.array([[1.0], [1.0]]), np.ones(2, dtype=bool), np.array([2.0, np.inf])
    )
    np.testing.assert_allclose(rates, [2.0, 8.0], rtol=1e-15)


def test_inactive_flows_get_zero_and_take_nothing() -> None:
    """An inactive flow gets rate 0 and the active one has the whole link."""
    rates = max_min_rates(np.array([10.0]), np.array([[1.0], [1.0]]), np.array([True, False]))
    np.testing.assert_array_equal(rates, [10.0, 0.0])


def test_zero_capacity_gives_zero_rate() -> None:
    """Flows on a zero-capacity resource get rate 0; a flow elsewhere is unaffected."""
    usage = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    rates = max_min_rates(np.array([0.0, 4.0]), usage, np.ones(3, dtype=bool))
    np.testing.assert_array_equal(rates, [0.0, 0.0, 4.0])


def test_unconstrained_flow_is_infinite() -> None:
    """A flow with no usage and no cap is infinitely fast (documented); with a cap it gets the cap."""
    usage = np.zeros((2, 1))
    rates = max_min_rates(np.array([1.0]), usage, np.ones(2, dtype=bool), np.array([np.inf, 5.0]))
    assert rates[0] == np.inf
    assert rates[1] == 5.0


def test_sparse_input_equals_dense() -> None:
    """A scipy CSR usage matrix gives exactly the dense result."""
    usage = np.array([[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    capacity = np.array([1.0, 2.0, 3.0])
    dense = max_min_rates(capacity, usage, ALL4)
    sparse = max_min_rates(capacity, sp.csr_array(usage), ALL4)
    np.testing.assert_array_equal(dense, sparse)


def test_bad_shapes_and_values_raise() -> None:
    """Mismatched shapes and negative coefficients are NetworkErrors, not silent garbage."""
    with pytest.raises(NetworkError, match="shape"):
        max_min_rates(np.ones(2), np.ones((3, 3)), np.ones(3, dtype=bool))
    with pytest.raises(NetworkError, match=">= 0"):
        max_min_rates(np.ones(1), np.array([[-1.0]]), np.ones(1, dtype=bool))
    with pytest.raises(NetworkError, match="capacity"):
        max_min_rates(np.array([-1.0]), np.ones((1, 1)), np.ones(1, dtype=bool))
