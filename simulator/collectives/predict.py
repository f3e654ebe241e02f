"""Public entry points: predict one collective, or a size sweep as nccl-tests would print it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simulator.collectives.busbw import busbw_factor
from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate
from simulator.collectives.flows import collective_flow, collective_resources, resource_capacities
from simulator.collectives.harness import timed_loop_s
from simulator.collectives.nccl_releases import tuner_release
from simulator.collectives.p2p_channels import p2p_net_channels
from simulator.collectives.params import ModelParams, prior_params
from simulator.collectives.select import allowed_sets, best_estimate, candidate_shapes, view_for_env
from simulator.collectives.transports import plugin_env
from simulator.collectives.tuner import channel_limits, env_channels
from simulator.core.errors import ConfigError
from simulator.network.engine import FlowEngine

DTYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "uint8": 1, "int32": 4}


@dataclass(frozen=True)
class CollectiveRow:
    """One row of a predicted nccl-tests table."""

    size_bytes: int
    count: int
    dtype: str
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algo: str
    proto: str


def size_sweep(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Sizes as nccl-tests' -b/-e/-f walk them (geometric, max included when reached)."""
    if min_bytes <= 0 or max_bytes <= 0:
        raise ConfigError(f"sizes must be positive: -b {min_bytes} -e {max_bytes}")
    if max_bytes < min_bytes:
        raise ConfigError(f"-e {max_bytes} is smaller than -b {min_bytes}")
    if factor < 2:
        raise ConfigError(f"-f must be >= 2, got {factor}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def predict_collective(v: CommView, op: str, size_bytes: int, algo: str = "auto", proto: str = "auto",
                       env: Mapping[str, str] | None = None, params: ModelParams | None = None,
                       nccl_release: tuple[int, int] | None = None,
                       selection: str = "model", repeat: int = 1) -> CollectiveEstimate:
    """Predicted time of one collective on an idle cluster (closed form). `params` defaults to the
    published-facts prior for the cluster; a calibration profile supplies fitted ones. The algorithm
    and protocol are the fastest the model prices (`selection` 'model') or those NCCL `nccl_release`
    (major, minor; None: the newest) would choose ('nccl'); simulator.collectives.select. `repeat`: one of that
    many back-to-back calls (the model's selection then ranks the pairs by the series' time). `env` is the
    user's NCCL environment, over what the cluster's network plugin sets (transports.plugin_env)."""
    if size_bytes < 0:
        raise ConfigError(f"size must not be negative, got {size_bytes}")
    # the network plugin's settings (transports.plugin_env), then the user's, which win
    env = {**plugin_env(v.transport, v.arch, v.gpudirect_rdma), **(env or {})}
    algos, protos = allowed_sets(algo, proto, env)
    if v.n_ranks == 1:  # nothing to exchange: NCCL returns after a local copy at most
        return CollectiveEstimate(op, size_bytes, "none", "none", 0.0, 0.0, 0.0, 0.0, "none", 0)
    view = view_for_env(v, env)
    chosen = params if params is not None else prior_params(view)
    release, limits = tuner_release(nccl_release), channel_limits(env)
    return best_estimate(op, size_bytes, candidate_shapes(op, view, algos), view, protos, chosen, release, limits,
                         selection, repeat, p2p_net_channels(op, view, release, env, limits, nccl_release))


# NCCL variables read as channel counts where they are used (p2p_channels); checked up front by check_env
P2P_CHANNEL_VARIABLES = ("NCCL_NCHANNELS_PER_NET_PEER", "NCCL_MIN_P2P_NCHANNELS", "NCCL_MAX_P2P_NCHANNELS")


def check_env(v: CommView, env: Mapping[str, str] | None) -> None:
    """Read every NCCL variable of `env` that the predictions use, as they will (ConfigError naming the first one
    whose value they cannot take), so that a bad value is reported where the environment is given rather than
    at the first collective priced with it."""
    env = env or {}
    allowed_sets("auto", "auto", env)
    view_for_env(v, env)
    channel_limits(env)
    for name in P2P_CHANNEL_VARIABLES:
        env_channels(env, name)


def simulate_alone(est: CollectiveEstimate, v: CommView) -> float:
    """Run one collective through the SimPy flow engine on idle links; returns seconds."""
    capacity = resource_capacities(v)
    engine = FlowEngine(collective_resources(capacity))
    done = engine.transfer([collective_flow(est, capacity)])
    engine.run(done)
    return max(record.end_s for record in engine.records)


PER_RANK_COUNT = ("all_gather", "reduce_scatter", "alltoall")  # nccl-tests prints these counts per rank


def collective_table(v: CommView, op: str, sizes: list[int], algo: str = "auto", proto: str = "auto",
                     env: Mapping[str, str] | None = None, dtype: str = "float",
                     use_engine: bool = False, params: ModelParams | None = None,
                     nccl_release: tuple[int, int] | None = None,
                     selection: str = "model", gpus_per_thread: int = 1) -> list[CollectiveRow]:
    """Predict a sweep; busbw uses nccl-tests' factor for the operation, and the count column its
    convention: elements per rank (size / n) for all_gather, reduce_scatter and alltoall, all of the
    size's otherwise. Times are those nccl-tests' loop prints with `gpus_per_thread` GPUs driven by
    each test thread (its -g; simulator.collectives.harness)."""
    elem = DTYPE_BYTES.get(dtype)
    if elem is None:
        raise ConfigError(f"unknown dtype {dtype!r} (valid: {', '.join(DTYPE_BYTES)})")
    factor = busbw_factor(op, v.n_ranks)
    rows = []
    for size in sizes:
        est = predict_collective(v, op, size, algo, proto, env, params, nccl_release, selection)
        time_s = timed_loop_s(simulate_alone(est, v) if use_engine else est.time_s, gpus_per_thread)
        algbw = size / time_s / 1e9 if time_s > 0 else 0.0
        count = size // elem // (v.n_ranks if op in PER_RANK_COUNT else 1)
        rows.append(CollectiveRow(size, count, dtype, time_s * 1e6, algbw, algbw * factor, est.algo, est.proto))
    return rows
