"""How a mixture of experts' router loads the busiest expert-parallel rank.

Every rank of an expert-parallel group waits at the combine all-to-all for the rank whose experts got
the most tokens, so the step runs at that rank's pace (as it runs at a straggler's): the representative
GPU is the busiest rank. Its routed rows (the grouped expert GEMMs, the dispatcher's permutation
copies, the MLP intermediates kept for backward) and the all-to-all bytes it receives and sends back
are `routed_load` times the balanced share k b s / ep of its ranks' tokens:
- dropless routing: the load imbalance f (max / mean tokens per rank; 1 when balanced, as the
  load-balancing loss aims; Lepikhin et al. 2021, Fedus et al. 2022), at most ep (one rank gets every
  token of its group);
- with a capacity factor C (an expert takes at most C times its balanced share, the rest is dropped;
  Fedus et al. 2022, section 2.2): min(f, C), the busiest rank's experts taken as equally loaded;
- padded to capacity (Megatron-Core --moe-pad-expert-input-to-capacity): C on every rank.
Without expert parallelism one GPU holds every expert and computes all of its tokens' routed rows
however they spread, so only a capacity below 1 (drops) or padding changes its load.

The mean rank computes its balanced share (cut by a capacity below 1, raised by padding); the wait of
the others on the busiest is the difference of the two ranks' block compute (`wait_s`), reported like a
straggler's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from simulator.core.errors import ConfigError
from simulator.training.recompute import runs_recomputing
from simulator.training.shards import chunk_layers
from workloads.model import TransformerModel
from workloads.spec import RoutingSpec, TrainingSpec

if TYPE_CHECKING:
    from simulator.training.compute import ComputeModel


def _imbalance(routing: RoutingSpec, ep: int) -> float:
    """The busiest rank's tokens over the mean rank's: at most ep (one rank gets every token of its group),
    1 without expert parallelism."""
    return min(routing.load_imbalance, ep)


def routed_loads(routing: RoutingSpec, ep: int) -> tuple[float, float]:
    """Routed rows of the busiest and of the mean expert-parallel rank over the balanced share (module
    docstring): the mean rank keeps its balanced share unless a capacity below 1 cuts it or padding
    raises it."""
    if routing.pad_to_capacity and routing.capacity_factor is not None:
        return routing.capacity_factor, routing.capacity_factor
    imbalance = _imbalance(routing, ep)
    capacity = math.inf if routing.capacity_factor is None else routing.capacity_factor
    return min(imbalance, capacity), min(1.0, capacity)


def routed_load(routing: RoutingSpec, ep: int) -> float:
    """Routed rows of the busiest expert-parallel rank over the balanced share: the representative GPU's."""
    return routed_loads(routing, ep)[0]


def kept_share(routing: RoutingSpec) -> float:
    """Share of the routed token-expert pairs the experts compute: all of them without a capacity, min(1, C)
    with one (balanced routing already fills a capacity below 1; padding adds rows, not useful work). What
    the model FLOPs (and so MFU) count of the routed experts."""
    return 1.0 if routing.capacity_factor is None else min(1.0, routing.capacity_factor)


def describe(routing: RoutingSpec) -> str:
    """'load imbalance 1.5, capacity factor 1.25 (padded)'; '' for balanced, dropless routing."""
    parts = [f"load imbalance {routing.load_imbalance:g}"] if routing.load_imbalance != 1.0 else []
    if routing.capacity_factor is not None:
        parts.append(f"capacity factor {routing.capacity_factor:g}{' (padded)' if routing.pad_to_capacity else ''}")
    return ", ".join(parts)


def dropped_fraction(routing: RoutingSpec, ep: int) -> float:
    """Share of the busiest rank's routed tokens over its experts' capacity, dropped (0 dropless)."""
    imbalance = _imbalance(routing, ep)
    if routing.capacity_factor is None or routing.capacity_factor >= imbalance:
        return 0.0
    return 1.0 - routing.capacity_factor / imbalance


def check_routing(training: TrainingSpec, model: TransformerModel) -> None:
    """ConfigError for routing settings on a model without routed experts, or a capacity beyond what an
    expert can take: every token once, E / k times the balanced share."""
    routing, spec = training.routing, model.spec
    if routing != RoutingSpec() and not spec.moe:
        raise ConfigError(f"training.routing: model {spec.name} has a dense MLP (no router); routing "
                          "applies to a mixture of experts (experts > 1)")
    most = spec.experts / spec.experts_per_token if spec.moe else math.inf
    if routing.capacity_factor is not None and routing.capacity_factor > most:
        raise ConfigError(f"training.routing.capacity_factor {routing.capacity_factor:g}: at most experts / "
                          f"experts_per_token ({most:g}), when an expert takes every token")


def wait_s(model: TransformerModel, training: TrainingSpec, compute: ComputeModel, seq_len: int,
           micro_steps: int) -> float:
    """Seconds the mean expert-parallel rank waits on the busiest in one step: the two ranks' block
    compute (forward, recompute, backward) apart, over the mixture blocks of the pipeline stage holding the
    most of them and every micro-step; 0 when they carry the same load. `compute` is the busiest rank's."""
    par = training.parallel
    mean_load = routed_loads(training.routing, par.ep)[1]
    if compute.routed_load <= mean_load:
        return 0.0
    args = (model, training.micro_batch, seq_len, training.activation_checkpointing, par.tp,
            par.sequence_parallel, training.flash_attention, par.cp, par.ep, par.etp)
    busiest = compute.layer(*args)
    mean = compute.with_routed_load(mean_load).layer(*args)
    passes = busiest.forward_s + busiest.backward_s - mean.forward_s - mean.backward_s
    recompute = busiest.recompute_s - mean.recompute_s  # on the layers that recompute (recompute_layers)
    ranges = chunk_layers(model.spec.layers, par, model.mtp_layers)
    busiest_stage = max(sum(n * passes + r * recompute for c in range(par.virtual_stages)
                            for block, n, r in runs_recomputing(model, training, *ranges[c * par.pp + stage])
                            if block.spec.moe)
                        for stage in range(par.pp))
    return busiest_stage * micro_steps
