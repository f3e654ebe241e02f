"""The collective names clustersim knows and nccl-tests' bus-bandwidth factors for them.

nccl-tests reports `algbw = size / time` and `busbw = algbw * factor`, where the factor makes busbw
comparable with the hardware link bandwidth whatever the rank count (nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

from simulator.core.errors import ConfigError
from topologies.gpu_names import squeezed

COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "sendrecv",
)


def collective_name(value: str) -> str:
    """The collective `value` names, as clustersim spells it: nccl-tests' tool names the way sources and users
    write them ('AllReduce', 'all-reduce', 'allreduce', 'all_reduce_perf' -> all_reduce); `value` itself when it
    names none (the caller says what is valid)."""
    key = squeezed(value).removesuffix("perf")
    return next((name for name in COLLECTIVES if squeezed(name) == key), value)


def busbw_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for `collective` over `nranks` ranks, as nccl-tests defines it.

    all_reduce moves 2(n-1)/n x S per rank (reduce-scatter then all-gather); all_gather,
    reduce_scatter and alltoall move (n-1)/n x S; broadcast, reduce and sendrecv move S
    (nccl-tests doc/PERFORMANCE.md). Raises ConfigError for an unknown collective or nranks < 1.
    """
    if collective not in COLLECTIVES:
        raise ConfigError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise ConfigError(f"nranks must be an integer >= 1, got {nranks!r}")
    n = nranks
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0
