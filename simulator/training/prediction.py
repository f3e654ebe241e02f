"""What a training-step prediction says (DESIGN.md section 9 metrics, exact definitions).

- step_time_s: wall time of one optimizer step (all micro-batches).
- compute_s: busy time of the compute stream of the critical GPU.
- gpu_idle_s: the step minus each GPU's own compute, averaged over all the job's GPUs (the critical
  GPU's step_time_s - compute_s when all compute alike; a straggler's wait counts on the GPUs that
  wait); gpu_idle_by_class gives it per class of GPUs; gpu_idle_fraction = gpu_idle_s / step_time_s.
- exposed_comm_s: time the compute stream waits on communication; the rest of idle time is
  broken down in idle_breakdown_s (optimizer waits, bubbles; and what the other GPUs wait on the
  critical one: a straggler, the busiest expert-parallel rank).
- tokens_per_s; tflops_per_gpu: model FLOPs (6 N + attention, no recomputation) per second per
  GPU; mfu = tflops_per_gpu / the GPU's dense peak at the compute precision.
- memory_per_gpu_bytes and fits_in_memory (OOM is a result, not an error), with its breakdown;
  memory_capacity_bytes is what the job may hold per GPU: the GPU's memory, or with the job's
  memory_fraction that share and the CUDA context and NCCL's buffers beside it.
Planning figures for training on N tokens: time_to_train_s, gpu_hours, cost at a price per
GPU-hour, and energy: each GPU draws its board power (TDP) while computing and IDLE_POWER_FRACTION
of it while waiting (HBM, NVLink and the SMs polling NCCL flags stay up; measured H100/A100 idle
under a running job is a quarter to a third of TDP), times the busy and idle fractions of the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.training.pace import IdleClass
from simulator.training.timeline import RepeatedMicroSteps, Span

IDLE_POWER_FRACTION = 0.3


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU by what holds them."""

    parameters_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float
    reserve_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.parameters_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
                + self.buffers_bytes + self.reserve_bytes)


@dataclass(frozen=True)
class StepPrediction:
    """One training step on one cluster: time, throughput, idle time, memory, and what produced it."""

    step_time_s: float
    compute_s: float
    exposed_comm_s: float
    idle_breakdown_s: dict[str, float]
    tokens_per_step: int
    n_gpus: int
    model_flops_per_step: float
    peak_tflops: float
    memory: MemoryBreakdown
    memory_capacity_bytes: float
    comm_by_collective_s: dict[str, float] = field(default_factory=dict)
    model: str = "clustersim collective model + compute roofline"
    calibration: str | None = None
    nccl_selection: str = "model"  # whose choice of algorithm and protocol priced the collectives (nccl_setup)
    spans: tuple[Span, ...] = field(default=(), repr=False)  # the representative GPU's timeline
    gpu_tdp_w: float = 0.0
    # the job's GPUs by compute pace (slow ones, the others; simulator.training.pace); empty: all like the
    # critical GPU
    idle_classes: tuple[IdleClass, ...] = ()
    # the micro-steps the spans leave out (repeats of a simulated steady state); None: the spans are the whole step
    repeated: RepeatedMicroSteps | None = None

    @property
    def gpu_idle_by_class(self) -> dict[str, dict[str, float]]:
        """Each class's GPUs, idle seconds per step and idle fraction: the step minus its own compute."""
        classes = self.idle_classes or (IdleClass("all", self.n_gpus, self.compute_s),)
        return {c.name: {"gpus": c.gpus, "idle_s": max(0.0, self.step_time_s - c.compute_s),
                         "idle_fraction": max(0.0, self.step_time_s - c.compute_s) / self.step_time_s
                         if self.step_time_s > 0 else 0.0} for c in classes}

    @property
    def critical_idle_s(self) -> float:
        """The critical GPU's idle seconds per step (step_time_s - compute_s): its waits, which the idle
        breakdown splits by cause."""
        return max(0.0, self.step_time_s - self.compute_s)

    @property
    def gpu_idle_s(self) -> float:
        """The job's GPUs' idle seconds per step, averaged over all of them (see gpu_idle_by_class)."""
        by_class = self.gpu_idle_by_class.values()
        return sum(c["gpus"] * c["idle_s"] for c in by_class) / sum(c["gpus"] for c in by_class)

    @property
    def gpu_idle_fraction(self) -> float:
        return self.gpu_idle_s / self.step_time_s if self.step_time_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.n_gpus

    @property
    def tflops_per_gpu(self) -> float:
        return self.model_flops_per_step / self.step_time_s / self.n_gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.tflops_per_gpu / self.peak_tflops

    def time_to_train_s(self, tokens: float) -> float:
        """Wall time to train on `tokens` tokens at this step's throughput."""
        return tokens / self.tokens_per_s

    def gpu_hours(self, tokens: float) -> float:
        return self.time_to_train_s(tokens) * self.n_gpus / 3600.0

    @property
    def average_power_w(self) -> float:
        """Mean board power per GPU over a step (see module docstring)."""
        busy = 1.0 - self.gpu_idle_fraction
        return self.gpu_tdp_w * (busy + (1.0 - busy) * IDLE_POWER_FRACTION)

    def energy_kwh(self, tokens: float) -> float:
        """GPU energy to train on `tokens` tokens (GPUs only: no host, network or cooling)."""
        return self.average_power_w * self.n_gpus * self.time_to_train_s(tokens) / 3.6e6

    @property
    def memory_per_gpu_bytes(self) -> float:
        return self.memory.total_bytes

    @property
    def fits_in_memory(self) -> bool:
        return self.memory.total_bytes <= self.memory_capacity_bytes
