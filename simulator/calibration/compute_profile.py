"""The `compute:` section of a calibration profile: compute rates measured on one GPU.

Owns the measurement records (GEMMs, transformer layers, device memory copies), the FLOP and byte
formulas that turn a measured time into a rate, the consistency checks between the two, and the
conversion to and from plain dicts. `benchmarks/gpu_calibration.py` produces the section; the compute
model (DESIGN.md section 6: per-op time = max(flops / (peak x efficiency), bytes / (hbm x mem_eff))
+ launch) reads `gemm_efficiency` and `memory_bandwidth_GBps` from it. No I/O here: callers pass data.

In a profile file the section sits beside `schema_version`:

    schema_version: 1
    compute:
      gpu_name: NVIDIA H100 80GB HBM3
      ...
      gemms: [{m: 4096, n: 12288, k: 4096, dtype: bf16, time_s: 0.00062, tflops: 665.0}, ...]
      layers: [...]
      memory: [...]
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from simulator.core.errors import CalibrationError
from topologies.hardware import Precision

MAX_ERRORS_SHOWN = 5  # a profile of thousands of points wrong alike is named by its first few
RATE_TOLERANCE = 0.01  # a reported rate may differ from the one recomputed from its time by 1 % (rounding)


def gemm_flops(m: int, n: int, k: int) -> float:
    """FLOPs of C[m, n] = A[m, k] @ B[k, n]: one multiply and one add per (i, j, l), 2 x m x n x k."""
    return 2.0 * m * n * k


def layer_fwd_bwd_flops(hidden: int, seq_len: int, micro_batch: int) -> float:
    """Model FLOPs of one transformer layer, forward + backward, without recomputation.

    Forward = 24 x b x s x h^2 (QKV, attention output and the 4h MLP GEMMs) + 4 x b x s^2 x h (the two
    attention matmuls, full s x s, causal mask not discounted); backward = 2 x forward, so the total is
    3 x forward (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
    Using Megatron-LM", section 5.1). Layer norms, softmax and GELU are not counted.
    """
    b, s, h = micro_batch, seq_len, hidden
    return 3.0 * (24.0 * b * s * h * h + 4.0 * b * s * s * h)


def attention_forward_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> float:
    """FLOPs of one fused attention forward as the kernels' own benchmarks count them: the two matmuls
    Q K^T and P V, 2 x 2 x b x heads x s^2 x d, halved under a causal mask (FlashAttention-2 and -3's
    benchmark scripts; the MFU convention of the compute model counts the full s^2). The backward is
    counted as 2.5 x the forward (five matmuls against two)."""
    full = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return full / 2.0 if causal else full


ATTENTION_BACKWARD_OVER_FORWARD_FLOPS = 2.5


def copy_bytes_moved(size_bytes: int) -> float:
    """HBM traffic of a device-to-device copy of `size_bytes`: each byte is read once and written once."""
    return 2.0 * size_bytes


def _check_rate(field: str, reported: float, work: float, time_s: float, scale: float, formula: str) -> None:
    """Raise ValueError("<field>: ...") if `reported` is not work / time_s / scale within RATE_TOLERANCE."""
    expected = work / time_s / scale
    if abs(reported - expected) > RATE_TOLERANCE * expected:
        off = (reported - expected) / expected
        raise ValueError(
            f"{field}: {reported:g} does not match {formula} = {expected:.6g} "
            f"(off by {off:+.1%}, tolerance {RATE_TOLERANCE:.0%})"
        )


class GemmMeasurement(BaseModel):
    """One timed GEMM C[m, n] = A[m, k] @ B[k, n] and its achieved rate."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    m: int = Field(strict=True, ge=1, description="Rows of A and C (tokens, for a transformer GEMM).")
    n: int = Field(strict=True, ge=1, description="Columns of B and C (output features).")
    k: int = Field(strict=True, ge=1, description="Columns of A, rows of B (the reduction dimension, input features).")
    dtype: Precision = Field(description="Input precision of A and B: bf16, fp16, fp8, tf32 or fp32.")
    role: Literal["forward", "input_grad", "weight_grad"] = Field(
        default="forward",
        description="Which product of a linear layer y = x W^T (x [tokens, in], W [out, in]) this is, in its "
        "operands' memory layout: forward x @ W^T (m tokens, n out, k in); input_grad dy @ W (m tokens, n in, "
        "k out); weight_grad dy^T @ x (m out, n in, k tokens). fp8 GEMMs (torch._scaled_mm) take A row-major "
        "and B column-major in every role: 'forward' is one with fast accumulation (as Transformer Engine and "
        "torchao run the forward), 'input_grad' one with split accumulation (as they run both gradients).")
    time_s: float = Field(gt=0, description="Median time of one GEMM, seconds.")
    tflops: float = Field(gt=0, description="Achieved rate, TFLOP/s: 2 x m x n x k / time_s / 1e12.")

    @model_validator(mode="after")
    def _rate_matches_time(self) -> GemmMeasurement:
        _check_rate("tflops", self.tflops, gemm_flops(self.m, self.n, self.k), self.time_s, 1e12,
                    "2*m*n*k/time_s/1e12")
        return self


class LayerMeasurement(BaseModel):
    """One timed transformer layer, forward + backward, and its model FLOP rate."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    hidden: int = Field(strict=True, ge=1, description="Hidden size h.")
    heads: int = Field(strict=True, ge=1, description="Attention heads (divides hidden).")
    seq_len: int = Field(strict=True, ge=1, description="Sequence length s, tokens.")
    micro_batch: int = Field(strict=True, ge=1, description="Sequences per micro-batch b.")
    dtype: Precision = Field(description="Precision of weights and activations: bf16, fp16, fp8, tf32 or fp32.")
    fwd_bwd_time_s: float = Field(gt=0, description="Median time of one forward + backward of the layer, seconds.")
    model_tflops: float = Field(
        gt=0,
        description="Model FLOP rate, TFLOP/s: 3 x (24 b s h^2 + 4 b s^2 h) / fwd_bwd_time_s / 1e12 "
        "(Narayanan et al. 2021).",
    )

    @model_validator(mode="after")
    def _rate_matches_time(self) -> LayerMeasurement:
        if self.hidden % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide hidden {self.hidden}")
        _check_rate("model_tflops", self.model_tflops,
                    layer_fwd_bwd_flops(self.hidden, self.seq_len, self.micro_batch), self.fwd_bwd_time_s, 1e12,
                    "3*(24*b*s*h^2+4*b*s^2*h)/fwd_bwd_time_s/1e12")
        return self


class AttentionMeasurement(BaseModel):
    """One timed fused attention kernel (torch scaled_dot_product_attention with one backend), forward and
    backward, and its rates in the kernels' benchmark convention (attention_forward_flops)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    backend: str = Field(min_length=1, description="SDPA backend: flash (FlashAttention-2), cudnn or efficient.")
    batch: int = Field(strict=True, ge=1, description="Sequences b.")
    heads: int = Field(strict=True, ge=1, description="Query heads.")
    kv_heads: int = Field(strict=True, ge=1, description="Key/value heads (fewer than heads: grouped-query).")
    seq_len: int = Field(strict=True, ge=1, description="Tokens per sequence s (queries and keys).")
    head_dim: int = Field(strict=True, ge=1, description="Head dimension d.")
    causal: bool = Field(description="Causal mask.")
    dtype: Precision = Field(description="Precision of q, k and v.")
    forward_time_s: float = Field(gt=0, description="Median time of one forward, seconds.")
    backward_time_s: float = Field(gt=0, description="Median time of forward + backward less the forward's, seconds.")
    forward_tflops: float = Field(gt=0, description="attention_forward_flops / forward_time_s / 1e12.")
    backward_tflops: float = Field(gt=0, description="2.5 x attention_forward_flops / backward_time_s / 1e12.")

    @model_validator(mode="after")
    def _rate_matches_time(self) -> AttentionMeasurement:
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads: {self.kv_heads} does not divide heads {self.heads}")
        flops = attention_forward_flops(self.batch, self.heads, self.seq_len, self.head_dim, self.causal)
        _check_rate("forward_tflops", self.forward_tflops, flops, self.forward_time_s, 1e12,
                    "attention_forward_flops/forward_time_s/1e12")
        _check_rate("backward_tflops", self.backward_tflops, ATTENTION_BACKWARD_OVER_FORWARD_FLOPS * flops,
                    self.backward_time_s, 1e12, "2.5*attention_forward_flops/backward_time_s/1e12")
        return self


class MemoryMeasurement(BaseModel):
    """One timed device-to-device copy and the HBM bandwidth it achieved (read + write)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    size_bytes: int = Field(strict=True, ge=1, description="Bytes copied (the size of the source buffer).")
    time_s: float = Field(gt=0, description="Median time of one copy, seconds.")
    bandwidth_GBps: float = Field(
        gt=0, description="HBM bandwidth, GB/s (1e9 bytes/s), read + write counted: 2 x size_bytes / time_s / 1e9."
    )

    @model_validator(mode="after")
    def _rate_matches_time(self) -> MemoryMeasurement:
        _check_rate("bandwidth_GBps", self.bandwidth_GBps, copy_bytes_moved(self.size_bytes), self.time_s, 1e9,
                    "2*size_bytes/time_s/1e9")
        return self


class ComputeCalibration(BaseModel):
    """Compute rates measured on one GPU, with the provenance needed to trust or reject them."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu_name: str = Field(min_length=1, description="GPU name as torch.cuda.get_device_name reports it.")
    driver_version: str | None = Field(default=None, description="NVIDIA driver version (nvidia-smi), or null.")
    cuda_version: str | None = Field(default=None, description="torch.version.cuda, or null.")
    torch_version: str = Field(min_length=1, description="torch.__version__ of the measuring run.")
    measured_at: str = Field(
        description="When the measurement ran, ISO 8601 date-time (e.g. 2025-01-31T12:00:00+00:00)."
    )
    host: str | None = Field(default=None, description="Hostname of the measuring machine, or null.")
    gemms: list[GemmMeasurement] = Field(min_length=1, description="Timed GEMMs (at least one).")
    layers: list[LayerMeasurement] = Field(description="Timed transformer layers, forward + backward.")
    memory: list[MemoryMeasurement] = Field(description="Timed device-to-device copies (HBM bandwidth).")
    attention: list[AttentionMeasurement] = Field(
        default_factory=list, description="Timed fused attention kernels, forward and backward (--table runs).")
    notes: str | None = Field(default=None, description="Free text: settings, caveats, who ran it.")

    @field_validator("measured_at", mode="before")
    @classmethod
    def _iso_date_time(cls, value: Any) -> Any:
        # YAML reads an unquoted 2025-01-31T12:00:00Z as a datetime; keep it as the ISO string.
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, str):
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"not an ISO 8601 date-time: {value!r} (e.g. 2025-01-31T12:00:00+00:00)") from None
        return value

    @field_validator("driver_version", "cuda_version", "torch_version", mode="before")
    @classmethod
    def _version_is_text(cls, value: Any) -> Any:
        # YAML reads an unquoted 12.4 as a float (and 12.10 as 12.1): ask for quotes rather than guess.
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError(f"YAML read {value!r} as a number; quote the version, e.g. '{value}'")
        return value

    def gemm_efficiency(self, peak_tflops: float, dtype: Precision | None = None) -> float:
        """Median over the GEMMs (of `dtype`, or all when they share one) of achieved / `peak_tflops`.

        The compute model's `efficiency` for GEMM-bound ops (DESIGN.md section 6). CalibrationError if
        the peak is not positive, no GEMM has `dtype`, dtypes are mixed and none is chosen, or the
        median exceeds the peak (the peak belongs to another GPU or precision).
        """
        if peak_tflops <= 0:
            raise CalibrationError(f"gemm_efficiency: peak_tflops must be > 0, got {peak_tflops}")
        dtypes = sorted({g.dtype for g in self.gemms})
        if dtype is None and len(dtypes) > 1:
            raise CalibrationError(f"gemm_efficiency: GEMMs of several dtypes {dtypes}; pass dtype= one of them")
        rates = [g.tflops for g in self.gemms if dtype is None or g.dtype == dtype]
        if not rates:
            raise CalibrationError(f"gemm_efficiency: no GEMM of dtype {dtype}; measured: {dtypes}")
        efficiency = statistics.median(rates) / peak_tflops
        if efficiency > 1.0:
            raise CalibrationError(
                f"gemm_efficiency: median {statistics.median(rates):g} TFLOP/s exceeds peak {peak_tflops:g} "
                f"(is the peak for {self.gpu_name}, {dtype or dtypes[0]}, dense?)"
            )
        return efficiency

    def memory_bandwidth_GBps(self) -> float:
        """Highest measured HBM bandwidth, GB/s (read + write): the compute model's hbm x mem_efficiency."""
        if not self.memory:
            raise CalibrationError("compute.memory: no memory measurements; cannot give a bandwidth")
        return max(m.bandwidth_GBps for m in self.memory)


def _describe(exc: ValidationError) -> str:
    """`compute.<path>: <message>` per error (the first MAX_ERRORS_SHOWN, then how many more), joined by '; '
    on one line.

    A model validator's message starts with the offending field ("tflops: ..."); that field joins
    the path, so a bad rate reads `compute.gemms.0.tflops: ...`.
    """
    parts = []
    for err in exc.errors():
        path = ["compute", *(str(p) for p in err["loc"])]
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            message = "missing (required)"
        elif err["type"] == "value_error":  # our own checks; they quote the value themselves
            field, sep, rest = message.partition(": ")
            if sep and field.isidentifier():
                path.append(field)
                message = rest
        elif isinstance(err.get("input"), str | int | float | bool | type(None)):
            message = f"{message} (got {err['input']!r})"
        parts.append(f"{'.'.join(path)}: {message}")
    shown = parts[:MAX_ERRORS_SHOWN]
    if len(parts) > len(shown):
        shown.append(f"and {len(parts) - len(shown)} more")
    return "; ".join(shown).replace("\n", " ")


def compute_calibration_from_dict(data: Any, source: str) -> ComputeCalibration:
    """Validate the `compute:` section `data` read from `source` (a file name, for messages).

    CalibrationError on one line, "<source>: compute.<field path>: <what is wrong>", otherwise.
    """
    if not isinstance(data, Mapping):
        raise CalibrationError(f"{source}: compute: expected a mapping of fields, found {type(data).__name__}")
    try:
        return ComputeCalibration.model_validate(dict(data))
    except ValidationError as exc:
        raise CalibrationError(f"{source}: {_describe(exc)}") from None


def compute_calibration_to_dict(calibration: ComputeCalibration) -> dict[str, Any]:
    """The `compute:` section as plain dicts, lists, str, int, float and None (yaml.safe_dump-able)."""
    return calibration.model_dump(mode="json")
