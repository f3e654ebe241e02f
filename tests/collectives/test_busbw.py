"""nccl-tests bus-bandwidth factors (doc/PERFORMANCE.md), for n = 8 and 16 ranks.

(These test simulator/collectives/busbw.py; they live here because the parser's owner owns that file.)
"""

from __future__ import annotations

import pytest

from simulator.collectives.busbw import COLLECTIVES, busbw_factor, collective_name
from simulator.core.errors import ConfigError

# collective -> (factor at n=8, factor at n=16), computed by hand from the nccl-tests definitions.
EXPECTED = {
    "all_reduce": (14 / 8, 30 / 16),  # 2(n-1)/n: 1.75, 1.875
    "all_gather": (7 / 8, 15 / 16),  # (n-1)/n: 0.875, 0.9375
    "reduce_scatter": (7 / 8, 15 / 16),
    "alltoall": (7 / 8, 15 / 16),
    "broadcast": (1.0, 1.0),
    "reduce": (1.0, 1.0),
    "sendrecv": (1.0, 1.0),
}


def test_collectives_tuple() -> None:
    """The seven collective names, in the documented order."""
    assert COLLECTIVES == (
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "reduce",
        "alltoall",
        "sendrecv",
    )


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_factor_at_8_and_16_ranks(collective: str) -> None:
    """busbw / algbw matches nccl-tests' definition at 8 and 16 ranks."""
    assert (busbw_factor(collective, 8), busbw_factor(collective, 16)) == EXPECTED[collective]


def test_all_reduce_factor_values() -> None:
    """all_reduce: 1.75 at 8 ranks and 1.875 at 16, as the published logs' busbw/algbw show."""
    assert (busbw_factor("all_reduce", 8), busbw_factor("all_reduce", 16)) == (1.75, 1.875)


def test_unknown_collective_and_bad_rank_count() -> None:
    """An unknown collective or a rank count below 1 is a ConfigError naming what is valid."""
    with pytest.raises(ConfigError, match="unknown collective 'allreduce'; expected one of all_reduce"):
        busbw_factor("allreduce", 8)
    with pytest.raises(ConfigError, match="nranks must be an integer >= 1, got 0"):
        busbw_factor("all_reduce", 0)


@pytest.mark.parametrize(("spelling", "name"), [
    ("allreduce", "all_reduce"), ("AllGather", "all_gather"), ("reduce-scatter", "reduce_scatter"),
    ("all_reduce_perf", "all_reduce"), ("alltoall_perf", "alltoall"), ("SendRecv", "sendrecv"),
    ("all_reduce", "all_reduce"),
])
def test_collective_name_reads_nccl_tests_tool_names(spelling: str, name: str) -> None:
    """nccl-tests' tool names as sources and users write them map to the collective's name."""
    assert collective_name(spelling) == name


def test_collective_name_leaves_an_unknown_name_to_the_caller() -> None:
    """A name of no collective comes back as given; the caller's check then names what is valid."""
    assert collective_name("hypercube") == "hypercube"
    with pytest.raises(ConfigError, match="unknown collective 'hypercube'"):
        busbw_factor(collective_name("hypercube"), 8)
