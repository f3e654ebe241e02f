"""The `run:` section of a scenario: training to a token count through failures, checkpoints and restarts.

A run trains `train_tokens` tokens at the predicted step time. Components fail (`failures`: a preset of
simulator/data/failures.yaml or explicit MTBFs per component class); the job then loses the work since
its last checkpoint, restarts (`restart`) and resumes. `checkpoint` says how often and how long a save
blocks training. simulator.run.params turns this spec, the cluster and the step into the numbers the run
model uses.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from simulator.core.errors import ConfigError
from simulator.core.units import from_text, parse_count

COMPONENT_CLASSES = ("gpu", "node", "nic", "link", "switch", "software")


class FailureRates(BaseModel):
    """Mean time between failures of one component of each class, in hours (absent: never fails)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu_mtbf_h: float | None = Field(default=None, gt=0, description="Hours between failures of one GPU.")
    node_mtbf_h: float | None = Field(
        default=None, gt=0, description="Hours between failures of one server (host hardware, host maintenance).")
    nic_mtbf_h: float | None = Field(default=None, gt=0, description="Hours between failures of one scale-out NIC.")
    link_mtbf_h: float | None = Field(
        default=None, gt=0, description="Hours between failures of one fabric cable (server-leaf or leaf-spine).")
    switch_mtbf_h: float | None = Field(
        default=None, gt=0, description="Hours between failures of one fabric switch (leaf, spine, core).")
    software_mtbf_h: float | None = Field(
        default=None, gt=0, description="Hours between software-caused stops, per server of the job (bugs, hangs, "
        "watchdog timeouts).")

    def mtbf_h(self) -> dict[str, float]:
        """{class: MTBF hours} of the classes that fail."""
        return {kind: value for kind in COMPONENT_CLASSES if (value := getattr(self, f"{kind}_mtbf_h")) is not None}


class CheckpointSpec(BaseModel):
    """How often the job saves its state, and how long a save stops training."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    interval_s: float | Literal["optimal"] = Field(
        default="optimal", description="Training seconds between checkpoints, or 'optimal': Young's sqrt(2 x save "
        "x job MTBF) (Young 1974; Daly 2006), rounded to whole steps.")
    save_s: float | None = Field(
        default=None, gt=0, description="Seconds a save takes. Default: the checkpoint's bytes (parameters and "
        "optimizer states) spread over the nodes, each writing at write_GBps.")
    write_GBps: float = Field(
        default=1.0, gt=0, description="Storage write bandwidth per node, GB/s (1e9 B/s). Default 1: Llama 3's "
        "Tectonic store sustains 2 TB/s for ~2,000 servers (Dubey et al. 2024, section 3.3.1).")
    async_save: bool = Field(
        default=False, alias="async", description="Asynchronous save: only the copy to host memory (at "
        "host_copy_GBps per GPU) blocks training; the write to storage overlaps the next interval, and a failure "
        "before it completes falls back to the checkpoint before.")
    host_copy_GBps: float = Field(
        default=25.0, gt=0, description="GPU-to-host copy bandwidth per GPU, GB/s, for async saves (PCIe Gen4 x16 "
        "pinned-memory copies reach ~25 GB/s; Gen5 ~50).")

    @model_validator(mode="after")
    def _positive_interval(self) -> CheckpointSpec:
        if self.interval_s != "optimal" and not self.interval_s > 0:
            raise ValueError(f"interval_s must be > 0 seconds or 'optimal', got {self.interval_s}")
        return self


class RestartSpec(BaseModel):
    """What a failure costs beyond the lost work: noticing it, getting the job running again, reloading."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    restart_s: float | None = Field(
        default=None, ge=0, description="Seconds from a failure to training again, all in (overrides the parts).")
    detect_s: float = Field(
        default=120.0, ge=0, description="Seconds to notice a failure (health checks, NCCL watchdog, heartbeat).")
    reschedule_s: float = Field(
        default=480.0, ge=0, description="Seconds to relaunch: drain, replace the node, start the processes, "
        "initialise NCCL and the data loaders.")
    read_GBps: float = Field(default=1.0, gt=0, description="Storage read bandwidth per node, GB/s, to reload.")
    hot_spares: int | None = Field(
        default=None, ge=0, description="Spare nodes held for the job. A GPU, node or NIC failure swaps one in and "
        "the failed node returns after repair_h; with none free the job waits. Default: a replacement is always "
        "at hand.")
    repair_h: float = Field(default=24.0, gt=0, description="Hours to repair a failed node and return it as a spare.")


class RunSpec(BaseModel):
    """Training to `train_tokens` tokens through failures, checkpoints and restarts (Monte Carlo over seeds)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    train_tokens: Annotated[float, BeforeValidator(from_text(parse_count))] = Field(
        gt=0, description="Tokens to train on: 15e12, 15T, 300B (K, M, G or B, T, P: powers of 1000).")
    failures: str | FailureRates = Field(
        default="llama3", description="A failure preset (llama3, rsc1, rsc2, none) or MTBFs per component class.")
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec, description="Checkpoint interval and cost.")
    restart: RestartSpec = Field(default_factory=RestartSpec, description="Restart cost and hot spares.")
    runs: int = Field(default=300, ge=1, le=100_000, description="Monte Carlo runs (seeds).")
    seed: int = Field(default=0, ge=0, description="Seed of the first run (run i uses seed, i).")


def parse_tokens(text: str, flag: str = "--train-tokens") -> float:
    """'15T', '1.5e12', '300B', '2G', '1000' -> tokens (decimal suffixes K, M, G or B, T, P: parse_count);
    ConfigError naming the flag otherwise."""
    try:
        tokens = parse_count(text)
    except ValueError as exc:
        raise ConfigError(f"{flag}: {exc}") from None
    if tokens <= 0:
        raise ConfigError(f"{flag}: expected a token count > 0 such as 15T, 300B, 1.5e12, got {text!r}")
    return float(tokens)
