"""`collective`: an NCCL collective predicted over a size sweep on a cluster, as `clustersim collective` (and
nccl-tests) tabulates it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.api.results import Result, records
from simulator.calibration.apply import calibration_for, load_profile
from simulator.collectives.busbw import COLLECTIVES, collective_name
from simulator.collectives.comm import comm_view
from simulator.collectives.nccl_releases import release_option
from simulator.collectives.predict import CollectiveRow, collective_table, size_sweep
from simulator.collectives.select import selection_option
from simulator.core.errors import ConfigError
from simulator.core.mappings import merged
from simulator.core.units import parse_size
from simulator.scenario_overrides import topology_of
from topologies.build import build_representative
from topologies.spec import TopologySpec, validate_topology_spec


@dataclass(frozen=True)
class CollectivePrediction(Result):
    """A predicted nccl-tests table: per size, one collective's time (µs), algbw = size / time and busbw =
    algbw x the nccl-tests factor (GB/s), the element count, and the algorithm and protocol chosen."""

    FIGURE = "collective_figure"

    topology: str | None
    nodes: int
    ranks: int
    op: str
    rows: tuple[CollectiveRow, ...]
    gpus_per_thread: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {**{key: value for key, value in super().to_dict().items() if key != "rows"},
                "rows": self.to_records()}

    def to_records(self) -> list[dict[str, Any]]:
        """One dict a size."""
        return records(self.rows)


def _size(value: int | str, name: str) -> int:
    if isinstance(value, int):
        return value
    try:
        return parse_size(value)
    except ValueError as exc:
        raise ConfigError(f"collective {name}: {exc}") from None


def collective(topology: str | Mapping[str, Any] | TopologySpec = "dgx-h100", nodes: int | None = None,
               op: str = "all_reduce", *, min_bytes: int | str = 8, max_bytes: int | str = "8G", factor: int = 2,
               sizes: Iterable[int] | None = None, algo: str = "auto", proto: str = "auto",
               env: Mapping[str, str] | None = None, dtype: str = "float", engine: bool = False,
               calibration: str | Path | None = None, force_calibration: bool = False,
               link_faults: Sequence[Mapping[str, Any]] | None = None,
               gpus_per_thread: int = 1, nccl_version: str | None = None,
               selection: str | None = None) -> CollectivePrediction:
    """Predict `op` (all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv) over all
    the GPUs of `topology` (a preset name, topology YAML path, TopologySpec or its fields) with `nodes`
    nodes (default: the topology's), for sizes from `min_bytes` to `max_bytes` times `factor` each step
    (8, '64K', '1M', '8G': powers of 1024) or the given `sizes`. `algo`/`proto` pin NCCL's choice, `env`
    is the NCCL environment, `engine` runs each size through the flow engine, `calibration` is a profile
    YAML, `link_faults` replaces the topology's, `gpus_per_thread` prices the loop as nccl-tests' -g does (one
    thread issuing that many GPUs' launches; simulator.collectives.harness). `nccl_version` is the NCCL release
    (the algorithms it offers; default: that of the calibration profile's logs, else the newest) and
    `selection` whose choice of algorithm and protocol: 'model' (the fastest the model prices) or 'nccl' (the
    release's tuner's); default: the one the calibration profile's fit priced with, else 'model'; as
    `clustersim collective --nccl-version --selection`. `op` may be spelled as nccl-tests names its tools
    (allreduce, AllReduce, all_reduce_perf)."""
    op = collective_name(op)
    if op not in COLLECTIVES:
        raise ConfigError(f"collective op: unknown collective {op!r} (valid: {', '.join(COLLECTIVES)})")
    spec = topology_of(topology, nodes)
    if link_faults is not None:
        spec = validate_topology_spec(merged(spec.model_dump(), {"link_faults": list(link_faults)}), "link_faults")
    walked = list(sizes) if sizes is not None else size_sweep(_size(min_bytes, "min_bytes"),
                                                              _size(max_bytes, "max_bytes"), factor)
    if not walked or min(walked) < 1:
        raise ConfigError(f"collective sizes: expected sizes >= 1 byte, got {walked}")
    view = comm_view(build_representative(spec))
    fitted = calibration_for(load_profile(None if calibration is None else Path(calibration)), spec.gpu,
                             spec.intra_node, view, force_calibration)
    release = release_option(nccl_version, "collective nccl_version") or fitted.release
    stated = None if selection is None else selection_option(selection, "collective selection")
    rows = collective_table(view, op, walked, algo, proto, dict(env or {}), dtype, use_engine=engine,
                            params=fitted.params, nccl_release=release, selection=fitted.selection_or(stated),
                            gpus_per_thread=gpus_per_thread)
    return CollectivePrediction(spec.name, spec.nodes, view.n_ranks, op, tuple(rows), gpus_per_thread)
