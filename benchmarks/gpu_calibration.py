"""GPU compute calibration: measure one NVIDIA GPU's compute rates with torch and save them as the
`compute:` section of a calibration profile (simulator/calibration/compute_profile.py).

Run: python benchmarks/gpu_calibration.py -o compute.yaml [--quick]
(on a machine with an NVIDIA GPU and torch; CUDA device 0, pick another with CUDA_VISIBLE_DEVICES;
from a checkout without `pip install -e .`, prefix PYTHONPATH=.). --quick runs a small subset, well
under a minute on an H100; the full run about a minute or two.

What it measures, each point after a warm-up as the median of N repeats timed with CUDA events:
1. bf16 GEMMs C[m, n] = A[m, k] @ B[k, n] of transformer shapes, t tokens and hidden size h:
   QKV (t x h x 3h), attention output (t x h x h), MLP up (t x h x 4h), MLP down (t x 4h x h).
   Rate = 2 x m x n x k / time (one multiply-add = 2 FLOPs).
2. One pre-LayerNorm transformer layer built from torch.nn primitives (LayerNorm, Linear QKV,
   scaled_dot_product_attention with a causal mask, Linear output, LayerNorm, Linear-GELU-Linear MLP
   of width 4h), bf16, forward + backward (weight and input gradients).
   Model rate = 3 x (24 x b x s x h^2 + 4 x b x s^2 x h) / time (Narayanan et al. 2021, "Efficient
   Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section 5.1: forward FLOPs,
   backward = 2 x forward). The s^2 term counts full attention, so a causal kernel that skips the
   masked half reads somewhat above its hardware rate; layer norms and GELU are not counted.
3. A device-to-device copy of 1-4 GiB: bandwidth = 2 x bytes / time / 1e9 GB/s (read + write).

It also records the GPU name, NVIDIA driver (nvidia-smi), CUDA and torch versions, the date and the
hostname, and writes {"schema_version": 1, "compute": {...}} as YAML. Without torch or a CUDA device
it prints one line to stderr and exits with code 2, writing nothing.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from simulator.calibration.compute_profile import (
    ComputeCalibration,
    compute_calibration_from_dict,
    compute_calibration_to_dict,
    copy_bytes_moved,
    gemm_flops,
    layer_fwd_bwd_flops,
)
from simulator.core.errors import CalibrationError

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # main() reports it as "no CUDA GPU visible" and exits 2
    HAVE_TORCH = False
else:
    HAVE_TORCH = True

SCHEMA_VERSION = 1  # of the calibration profile file that holds the `compute:` section
GIB = 1024**3
NO_GPU = "gpu_calibration: no CUDA GPU visible ({why}); run this on a machine with an NVIDIA GPU"


@dataclass(frozen=True)
class Plan:
    """What one run measures: (hidden, tokens) GEMM sets, (hidden, heads, seq_len, micro_batch) layers,
    copy sizes in bytes, and the warm-up and timed calls per point."""

    gemms: tuple[tuple[int, int], ...]
    layers: tuple[tuple[int, int, int, int], ...]
    copies: tuple[int, ...]
    warmup: int
    repeats: int


FULL = Plan(gemms=tuple((h, t) for h in (4096, 8192) for t in (4096, 8192, 16384)),
            layers=((4096, 32, 2048, 4), (4096, 32, 4096, 2), (8192, 64, 4096, 1)),
            copies=(1 * GIB, 2 * GIB, 4 * GIB), warmup=10, repeats=50)
QUICK = Plan(gemms=((4096, 4096),), layers=((4096, 32, 2048, 1),), copies=(1 * GIB,), warmup=3, repeats=10)


def median_time_s(fn: Callable[[], object], warmup: int, repeats: int) -> float:
    """Median seconds of one call of `fn` on the GPU: CUDA events around each call, queued back to back
    (one synchronisation at the end) so the GPU does not idle between calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events) / 1e3


def measure_gemm(m: int, n: int, k: int, warmup: int, repeats: int) -> dict[str, Any]:
    """One bf16 GEMM A[m, k] @ B[k, n]."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    time_s = median_time_s(lambda: torch.matmul(a, b), warmup, repeats)
    return {"m": m, "n": n, "k": k, "dtype": "bf16", "time_s": time_s, "tflops": gemm_flops(m, n, k) / time_s / 1e12}


def transformer_gemms(hidden: int, tokens: int) -> list[tuple[int, int, int]]:
    """(m, n, k) of the four GEMMs of a layer's forward: QKV, attention output, MLP up, MLP down."""
    h, t = hidden, tokens
    return [(t, 3 * h, h), (t, h, h), (t, 4 * h, h), (t, h, 4 * h)]


def build_layer(hidden: int) -> Any:
    """The layer's weights as torch.nn modules, created in bf16 on the GPU (no slow CPU init)."""
    h = hidden
    on_gpu: dict[str, Any] = {"device": "cuda", "dtype": torch.bfloat16}
    return torch.nn.ModuleDict({
        "ln1": torch.nn.LayerNorm(h, **on_gpu), "qkv": torch.nn.Linear(h, 3 * h, **on_gpu),
        "proj": torch.nn.Linear(h, h, **on_gpu), "ln2": torch.nn.LayerNorm(h, **on_gpu),
        "up": torch.nn.Linear(h, 4 * h, **on_gpu), "down": torch.nn.Linear(4 * h, h, **on_gpu),
    })


def layer_forward(layer: Any, x: Any, heads: int) -> Any:
    """Pre-LN block: x + proj(causal_attention(ln1(x))), then + down(gelu(up(ln2(x))))."""
    b, s, h = x.shape
    qkv = layer["qkv"](layer["ln1"](x)).view(b, s, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
    attention = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
    x = x + layer["proj"](attention.transpose(1, 2).reshape(b, s, h))
    return x + layer["down"](F.gelu(layer["up"](layer["ln2"](x))))


def measure_layer(hidden: int, heads: int, seq_len: int, micro_batch: int, warmup: int, repeats: int) -> dict[str, Any]:
    """One layer's forward + backward (weight and input gradients), bf16."""
    layer = build_layer(hidden)
    x = torch.randn(micro_batch, seq_len, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad_out = torch.randn_like(x)

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer_forward(layer, x, heads).backward(grad_out)

    time_s = median_time_s(step, warmup, repeats)
    flops = layer_fwd_bwd_flops(hidden, seq_len, micro_batch)
    return {"hidden": hidden, "heads": heads, "seq_len": seq_len, "micro_batch": micro_batch, "dtype": "bf16",
            "fwd_bwd_time_s": time_s, "model_tflops": flops / time_s / 1e12}


def measure_copy(size_bytes: int, warmup: int, repeats: int) -> dict[str, Any]:
    """One device-to-device copy of `size_bytes`."""
    src = torch.empty(size_bytes, device="cuda", dtype=torch.uint8).fill_(1)
    dst = torch.empty_like(src)
    time_s = median_time_s(lambda: dst.copy_(src), warmup, repeats)
    return {"size_bytes": size_bytes, "time_s": time_s, "bandwidth_GBps": copy_bytes_moved(size_bytes) / time_s / 1e9}


def run_points(label: str, measure: Callable[..., dict[str, Any]], points: Sequence[tuple[int, ...]]) -> list[dict]:
    """`measure(*point)` for each point; a point that runs out of GPU memory is skipped with a line on stderr."""
    results = []
    for point in points:
        try:
            results.append(measure(*point))
        except torch.cuda.OutOfMemoryError:
            print(f"gpu_calibration: skipped {label} {point}: out of GPU memory", file=sys.stderr)
        torch.cuda.empty_cache()
    return results


def driver_version() -> str | None:
    """NVIDIA driver version from nvidia-smi, or None without it (torch does not report the driver)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=60, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def calibrate(quick: bool) -> ComputeCalibration:
    """Run every measurement of the chosen plan on CUDA device 0 and validate the result."""
    plan = QUICK if quick else FULL
    warmup, repeats = plan.warmup, plan.repeats
    shapes = [(m, n, k, warmup, repeats) for h, t in plan.gemms for m, n, k in transformer_gemms(h, t)]
    layers = [(*point, warmup, repeats) for point in plan.layers]
    copies = [(size, warmup, repeats) for size in plan.copies]
    data = {
        "gpu_name": torch.cuda.get_device_name(0),
        "driver_version": driver_version(),
        "cuda_version": torch.version.cuda,
        "torch_version": str(torch.__version__),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname() or None,
        "gemms": run_points("GEMM (m, n, k)", measure_gemm, shapes),
        "layers": run_points("layer (hidden, heads, seq_len, micro_batch)", measure_layer, layers),
        "memory": run_points("copy (bytes)", measure_copy, copies),
        "notes": f"benchmarks/gpu_calibration.py {'--quick' if quick else '(full)'}: median of {repeats} CUDA-event "
        f"timings after {warmup} warm-up calls; layer = pre-LN, causal SDPA, GELU MLP 4h, forward + backward; "
        "model_tflops counts full (non-causal) attention FLOPs.",
    }
    return compute_calibration_from_dict(data, source="gpu_calibration")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-o", "--output", required=True, type=Path, help="YAML file to write.")
    parser.add_argument("--quick", action="store_true", help="A small subset (under a minute on an H100).")
    args = parser.parse_args(argv)
    if not HAVE_TORCH:
        print(NO_GPU.format(why="torch is not installed"), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(NO_GPU.format(why="torch.cuda.is_available() is False"), file=sys.stderr)
        return 2
    try:
        calibration = calibrate(args.quick)
    except CalibrationError as exc:
        print(f"gpu_calibration: {exc}", file=sys.stderr)
        return 1
    document = {"schema_version": SCHEMA_VERSION, "compute": compute_calibration_to_dict(calibration)}
    args.output.write_text(yaml.safe_dump(document, sort_keys=False))
    gemm_tflops = statistics.median(g.tflops for g in calibration.gemms)
    copy_GBps = max((m.bandwidth_GBps for m in calibration.memory), default=0.0)
    print(f"{calibration.gpu_name}: {len(calibration.gemms)} GEMMs, median {gemm_tflops:.0f} TFLOP/s; "
          f"{len(calibration.layers)} layers; copy {copy_GBps:.0f} GB/s -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
