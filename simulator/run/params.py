"""From a `run:` spec, the cluster and the predicted step to the numbers of the run model.

- Components per class: GPUs and nodes of the job; NICs, fabric cables (one per pair of directed
  links) and switches of the fabric clustersim builds for the topology. The job fails when any
  component does: its rate is the sum over classes of components / MTBF, its MTBF the inverse.
- Checkpoint bytes: the unique model states, parameters and optimizer states per parameter of the
  memory model (simulator.training.memory.STATE_BYTES: 2 + 12 bytes for mixed-precision Adam) times
  the parameters. Every node writes an equal share (fully parallel saves: Megatron-Core's
  distributed checkpoint, PyTorch DCP), so a save takes bytes / nodes / write_GBps; an async save
  blocks only for the copy of each GPU's share to host memory (bytes / GPUs / host_copy_GBps).
- Restart: detect_s + reschedule_s + reading the node's share back at read_GBps (or restart_s).
- Interval: checkpoint.interval_s or Young's optimum sqrt(2 x blocking save x job MTBF) (Young 1974),
  rounded to whole steps, never shorter than a save (an async write must finish before the next).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.core.errors import ConfigError
from simulator.run.presets import load_failures
from simulator.run.spec import RunSpec
from simulator.training.memory import STATE_BYTES
from simulator.training.prediction import IDLE_POWER_FRACTION, StepPrediction
from topologies.fabric import fabric_counts
from topologies.spec import TopologySpec
from workloads.model import transformer
from workloads.spec import ModelSpec, TrainingSpec

SPARE_CLASSES = ("gpu", "node", "nic")  # failures that take a server out until repaired


@dataclass(frozen=True)
class RunParams:
    """Everything the run model needs, in seconds and per-second rates."""

    work_s: float  # failure-free training time: steps x step time
    step_s: float
    interval_s: float  # training seconds between checkpoints (whole steps)
    save_block_s: float  # what a save stops training for
    persist_s: float  # async: the write to storage after the block (0 when saves are synchronous)
    restart_s: float
    rates_per_s: dict[str, float]  # job failure rate by component class
    hot_spares: int | None
    repair_s: float
    n_gpus: int
    gpus_per_node: int
    busy_power_w: float  # mean board power per GPU while training
    idle_power_w: float  # while saving, restarting, waiting
    checkpoint_bytes: float
    save_s: float  # the whole save, to storage

    @property
    def rate_per_s(self) -> float:
        return sum(self.rates_per_s.values())

    @property
    def job_mtbf_s(self) -> float:
        return 1.0 / self.rate_per_s if self.rate_per_s > 0 else math.inf


def component_counts(topology: TopologySpec) -> dict[str, int]:
    """Components of the job per failure class."""
    nics, cables, switches = fabric_counts(topology) if topology.nodes > 1 else (0, 0, 0)
    return {"gpu": topology.nodes * topology.gpus_per_node, "node": topology.nodes, "nic": nics, "link": cables,
            "switch": switches, "software": topology.nodes}


def checkpoint_bytes(model: ModelSpec, training: TrainingSpec) -> float:
    """Parameters and optimizer states of every parameter (the module docstring)."""
    regime = "fp32" if training.precision == "fp32" else "mixed"
    param_bytes, _, optimizer_bytes = STATE_BYTES[(regime, training.optimizer)]
    return transformer(model).total_params * (param_bytes + optimizer_bytes)


def save_seconds(run: RunSpec, topology: TopologySpec, training: TrainingSpec,
                 model: ModelSpec) -> tuple[float, float, float]:
    """(checkpoint bytes, seconds of a whole save, seconds it blocks training) (module docstring);
    ConfigError when a given interval is shorter than a save."""
    ckpt = run.checkpoint
    size = checkpoint_bytes(model, training)
    n_gpus = topology.nodes * topology.gpus_per_node
    save_s = ckpt.save_s if ckpt.save_s is not None else size / topology.nodes / (ckpt.write_GBps * 1e9)
    block_s = size / n_gpus / (ckpt.host_copy_GBps * 1e9) if ckpt.async_save else save_s
    if ckpt.interval_s != "optimal" and ckpt.interval_s < save_s:
        raise ConfigError(f"checkpoint.interval_s {ckpt.interval_s:g}: shorter than a save ({save_s:.1f} s); give "
                          f"at least {math.ceil(save_s)} or 'optimal'")
    return size, save_s, block_s


def run_params(run: RunSpec, topology: TopologySpec, training: TrainingSpec, model: ModelSpec,
               step: StepPrediction) -> RunParams:
    """Lower the spec (module docstring); ConfigError when the interval is shorter than a save."""
    rates = load_failures(run.failures) if isinstance(run.failures, str) else run.failures
    counts = component_counts(topology)
    per_s = {kind: counts[kind] / (mtbf * 3600.0) for kind, mtbf in rates.mtbf_h().items() if counts[kind] > 0}
    size, save_s, block_s = save_seconds(run, topology, training, model)
    restart = run.restart
    restart_s = restart.restart_s if restart.restart_s is not None else (
        restart.detect_s + restart.reschedule_s + size / topology.nodes / (restart.read_GBps * 1e9))
    steps = math.ceil(run.train_tokens / step.tokens_per_step)
    rate = sum(per_s.values())
    given = run.checkpoint.interval_s
    wanted = max(math.sqrt(2.0 * block_s / rate) if rate > 0 else math.inf, save_s) if given == "optimal" else given
    interval_steps = max(1, round(wanted / step.step_time_s)) if wanted < math.inf else steps
    interval_steps = min(steps, interval_steps + (interval_steps * step.step_time_s < save_s))  # a save ends first
    return RunParams(
        work_s=steps * step.step_time_s, step_s=step.step_time_s, interval_s=interval_steps * step.step_time_s,
        save_block_s=block_s, persist_s=save_s if run.checkpoint.async_save else 0.0, restart_s=restart_s,
        rates_per_s=per_s, hot_spares=restart.hot_spares, repair_s=restart.repair_h * 3600.0,
        n_gpus=topology.nodes * topology.gpus_per_node, gpus_per_node=topology.gpus_per_node,
        busy_power_w=step.average_power_w, idle_power_w=step.gpu_tdp_w * IDLE_POWER_FRACTION,
        checkpoint_bytes=size, save_s=save_s)
