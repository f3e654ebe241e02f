"""GPU compute calibration: measure one NVIDIA GPU's compute rates with torch and save them as the
`compute:` section of a calibration profile (simulator/calibration/compute_profile.py).

Run: python benchmarks/gpu_calibration.py -o compute.yaml [--quick | --table [--shapes SHAPES.json]]
(on a machine with an NVIDIA GPU and torch; CUDA device 0, pick another with CUDA_VISIBLE_DEVICES;
from a checkout without `pip install -e .`, prefix PYTHONPATH=.). --quick runs a small subset, well
under a minute on an H100; the full run about a minute or two; --table the shape table of 4 and 5
below as well, about three minutes on an H200.

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
4. (--table) GEMMs over a grid of shapes, every m, n and k in TABLE_DIMS, in bf16 (x @ W^T, the forward
   layout of torch's linear) and fp8 (torch._scaled_mm, e4m3 inputs, per-tensor scales, bf16 output),
   the latter with fast accumulation (as Transformer Engine and torchao run the forward) and without
   (their gradients);
   and each (m, n, k) of --shapes (a JSON list of [m, n, k]) in bf16 in all three roles of a linear
   layer (forward, input gradient, weight gradient; GemmMeasurement.role), to show what layout costs.
5. (--table) Fused attention through scaled_dot_product_attention, one backend at a time (flash =
   FlashAttention-2, cudnn), head dims 64 and 128 at 1k-16k tokens, causal or not, grouped-query or not,
   and causal at head dims 80-256 (2k, 8k tokens) and 64 and 128 at 512 and 32k-64k tokens:
   forward, and forward + backward, timed separately (AttentionMeasurement).

Operands are random normal values (zeros run faster: less switching power). The points are timed
back to back, so the GPU runs at the clock it sustains under load, as in training; `notes` records
nvidia-smi's clock, power and throttle reasons read while a long run of GEMMs was in flight.

It also records the GPU name, NVIDIA driver (nvidia-smi), CUDA and torch versions, the date and the
hostname, and writes {"schema_version": 1, "compute": {...}} as YAML. Without torch or a CUDA device
it prints one line to stderr and exits with code 2, writing nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from simulator.calibration.compute_profile import (
    ATTENTION_BACKWARD_OVER_FORWARD_FLOPS,
    ComputeCalibration,
    attention_forward_flops,
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
# --table: every m, n, k of the grid (1.5x steps from 512 to 32768: a tensor-parallel shard of a small model
# to a long micro-batch's tokens)
TABLE_DIMS = (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768)
# (dtype, role) of the grids: bf16 forward; fp8 forward (fast accumulation) and gradients (split accumulation)
TABLE_GRIDS = (("bf16", "forward"), ("fp8", "forward"), ("fp8", "input_grad"))
# (backend, heads, kv_heads, seq_len, head_dim, causal); batch = ATTENTION_TOKENS // seq_len
ATTENTION_POINTS = tuple(
    (backend, heads, kv, s, d, causal)
    for backend in ("flash", "cudnn")
    for d in (64, 128)
    for s in (1024, 2048, 4096, 8192, 16384)
    for heads, kv in ((16, 16), (32, 32), (32, 8), (64, 8))
    for causal in (True, False)
    if causal or (s in (4096, 8192) and heads == 32 and kv == 32)
) + tuple(  # other head widths (GPT-3 2.7B's 80, Nemotron-4 340B's 192, Gemma's 256) and the sequence's ends
    (backend, 32, 32, s, d, True)
    for backend in ("flash", "cudnn")
    for d, seqs in ((80, (2048, 8192)), (96, (2048, 8192)), (192, (2048, 8192)), (256, (2048, 8192)),
                    (64, (512, 32768, 65536)), (128, (512, 32768, 65536)))
    for s in seqs
)
ATTENTION_TOKENS = 16384
POINT_BUDGET_S = 0.02  # timed seconds per table point (repeats = budget / a first timing, 3 to 50)


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


def adaptive_time_s(fn: Callable[[], object]) -> float:
    """median_time_s with repeats sized to POINT_BUDGET_S from one timed call after two warm-ups."""
    first = median_time_s(fn, 2, 1)
    return median_time_s(fn, 1, min(50, max(3, math.ceil(POINT_BUDGET_S / first))))


class Operands:
    """Two random bf16 buffers, x and w, big enough for the table's largest operands (and their fp8 casts),
    so each point takes views of them instead of allocating: the activation or output gradient from x, the
    weight or input from w, in the layout of the product's role (gemm)."""

    def __init__(self, shapes: Sequence[tuple[int, int, int]]) -> None:
        largest = max(max(m * k, n * k, m * n) for m, n, k in shapes)
        self.x = torch.randn(largest, device="cuda", dtype=torch.bfloat16)
        self.w = torch.randn(largest, device="cuda", dtype=torch.bfloat16)
        self.x8 = self.x.to(torch.float8_e4m3fn)
        self.w8 = self.w.to(torch.float8_e4m3fn)
        self.one = torch.ones((), device="cuda", dtype=torch.float32)

    def gemm(self, m: int, n: int, k: int, dtype: str, role: str) -> Callable[[], object]:
        """The product of `role` (GemmMeasurement.role) with output [m, n] and reduction k."""
        if dtype == "fp8":  # A row-major, B column-major in every role; the forward accumulates fast
            a, b = self.x8[:m * k].view(m, k), self.w8[:n * k].view(n, k).t()
            fast = role == "forward"
            return lambda: torch._scaled_mm(a, b, self.one, self.one, out_dtype=torch.bfloat16, use_fast_accum=fast)
        if role == "forward":  # x [m, k] @ W^T, W [n, k]
            a, b = self.x[:m * k].view(m, k), self.w[:n * k].view(n, k).t()
        elif role == "input_grad":  # dy [m, k] @ W, W [k, n]: the input's gradient has the layer's in-features
            a, b = self.x[:m * k].view(m, k), self.w[:k * n].view(k, n)
        else:  # weight_grad: dy^T @ x, dy [k, m] (tokens k), x [k, n]
            a, b = self.x[:k * m].view(k, m).t(), self.w[:k * n].view(k, n)
        return lambda: torch.matmul(a, b)


def measure_table_gemm(operands: Operands, m: int, n: int, k: int, dtype: str, role: str) -> dict[str, Any]:
    time_s = adaptive_time_s(operands.gemm(m, n, k, dtype, role))
    return {"m": m, "n": n, "k": k, "dtype": dtype, "role": role, "time_s": time_s,
            "tflops": gemm_flops(m, n, k) / time_s / 1e12}


def measure_attention(backend: str, heads: int, kv_heads: int, seq_len: int, head_dim: int,
                      causal: bool) -> dict[str, Any]:
    """One SDPA forward, and forward + backward, with `backend` alone enabled."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    batch = max(1, ATTENTION_TOKENS // seq_len)
    q = torch.randn(batch, heads, seq_len, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(batch, kv_heads, seq_len, head_dim, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True) for _ in range(2))
    grad = torch.randn_like(q)
    gqa = {"enable_gqa": True} if kv_heads != heads else {}
    with sdpa_kernel([chosen]):
        def forward() -> Any:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

        def forward_backward() -> None:
            q.grad = k.grad = v.grad = None
            forward().backward(grad)

        with torch.no_grad():
            forward_s = adaptive_time_s(forward)
        both_s = adaptive_time_s(forward_backward)
    flops = attention_forward_flops(batch, heads, seq_len, head_dim, causal)
    backward_s = max(both_s - forward_s, 1e-9)
    return {"backend": backend, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq_len": seq_len,
            "head_dim": head_dim, "causal": causal, "dtype": "bf16", "forward_time_s": forward_s,
            "backward_time_s": backward_s, "forward_tflops": flops / forward_s / 1e12,
            "backward_tflops": ATTENTION_BACKWARD_OVER_FORWARD_FLOPS * flops / backward_s / 1e12}


def clocks_under_load(operands: Operands) -> str:
    """nvidia-smi's SM clock, power and throttle reasons read while ~2 s of 8192^3 bf16 GEMMs run."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no nvidia-smi"
    gemm = operands.gemm(8192, 8192, 8192, "bf16", "forward")
    for _ in range(1500):
        gemm()
    try:
        fields = "clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active"
        read = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv"], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        read = f"nvidia-smi failed: {exc}"
    torch.cuda.synchronize()
    return " ".join(read.split())


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


def run_points(label: str, measure: Callable[..., dict[str, Any]], points: Sequence[tuple[Any, ...]],
               raw: Any = None) -> list[dict]:
    """`measure(*point)` for each point; a point that runs out of GPU memory, or that the GPU or torch
    cannot run (an SDPA backend that refuses a shape, fp8 on a GPU without it), is skipped with a line on
    stderr. Each result is also written as a JSON line to `raw` (an open text file) when given."""
    results = []
    started = time.monotonic()
    for point in points:
        try:
            result = measure(*point)
        except torch.cuda.OutOfMemoryError:
            print(f"gpu_calibration: skipped {label} {point}: out of GPU memory", file=sys.stderr)
        except RuntimeError as exc:
            print(f"gpu_calibration: skipped {label} {point}: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
        else:
            results.append(result)
            if raw is not None:
                raw.write(json.dumps({"section": label, **result}) + "\n")
                raw.flush()
        torch.cuda.empty_cache()
    print(f"gpu_calibration: {len(results)} of {len(points)} {label} in {time.monotonic() - started:.0f} s",
          file=sys.stderr)
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


def table_points(shapes: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int, str, str]]:
    """(m, n, k, dtype, role) of the --table GEMMs: the grid in each dtype, then `shapes` in bf16 in all
    three roles."""
    grid = [(m, n, k, dtype, role) for dtype, role in TABLE_GRIDS
            for m, n, k in itertools.product(TABLE_DIMS, repeat=3)]
    roles = [(m, n, k, "bf16", role) for m, n, k in shapes for role in ("forward", "input_grad", "weight_grad")]
    return grid + roles


def calibrate(quick: bool, table: bool = False, shapes: Sequence[tuple[int, int, int]] = (),
              raw: Any = None) -> ComputeCalibration:
    """Run every measurement of the chosen plan on CUDA device 0 and validate the result."""
    plan = QUICK if quick else FULL
    warmup, repeats = plan.warmup, plan.repeats
    gemm_shapes = [(m, n, k, warmup, repeats) for h, t in plan.gemms for m, n, k in transformer_gemms(h, t)]
    layers = [(*point, warmup, repeats) for point in plan.layers]
    copies = [(size, warmup, repeats) for size in plan.copies]
    notes = (f"benchmarks/gpu_calibration.py {'--quick' if quick else '--table' if table else '(full)'}: median of "
             f"{repeats} CUDA-event timings after {warmup} warm-up calls; layer = pre-LN, causal SDPA, GELU MLP 4h, "
             "forward + backward; model_tflops counts full (non-causal) attention FLOPs. "
             f"cuDNN {torch.backends.cudnn.version()}.")
    data: dict[str, Any] = {
        "gpu_name": torch.cuda.get_device_name(0),
        "driver_version": driver_version(),
        "cuda_version": torch.version.cuda,
        "torch_version": str(torch.__version__),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname() or None,
        "gemms": run_points("GEMM (m, n, k)", measure_gemm, gemm_shapes, raw),
        "layers": run_points("layer (hidden, heads, seq_len, micro_batch)", measure_layer, layers, raw),
        "memory": run_points("copy (bytes)", measure_copy, copies, raw),
    }
    if table:
        points = table_points(shapes)
        operands = Operands([point[:3] for point in points])
        notes += (f" Table GEMMs and attention: median of 3-50 timings ({POINT_BUDGET_S:g} s a point) after two "
                  f"warm-ups. Under load: {clocks_under_load(operands)}.")
        data["gemms"] += run_points("table GEMM (m, n, k, dtype, role)",
                                    lambda *point: measure_table_gemm(operands, *point), points, raw)
        del operands
        torch.cuda.empty_cache()
        data["attention"] = run_points("attention (backend, heads, kv_heads, seq_len, head_dim, causal)",
                                       measure_attention, ATTENTION_POINTS, raw)
    data["notes"] = notes
    return compute_calibration_from_dict(data, source="gpu_calibration")


def read_shapes(path: Path) -> list[tuple[int, int, int]]:
    """--shapes: a JSON list of [m, n, k] (positive integers); ValueError naming the entry otherwise."""
    entries = json.loads(path.read_text())
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a JSON list of [m, n, k], found {type(entries).__name__}")
    shapes = []
    for i, entry in enumerate(entries):
        if not (isinstance(entry, list) and len(entry) == 3
                and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in entry)):
            raise ValueError(f"{path}: entry {i}: expected [m, n, k] of positive integers, found {entry!r}")
        shapes.append((entry[0], entry[1], entry[2]))
    return shapes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()) if __doc__ else None)
    parser.add_argument("-o", "--output", required=True, type=Path, help="YAML file to write.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="A small subset (under a minute on an H100).")
    mode.add_argument("--table", action="store_true",
                      help="Also the GEMM shape grid (bf16, fp8) and fused attention kernels (about three minutes "
                      "on an H200).")
    parser.add_argument("--shapes", type=Path, help="With --table: a JSON list of [m, n, k] also timed in bf16 in "
                        "all three roles of a linear layer.")
    parser.add_argument("--raw", type=Path, help="Also write each measurement as a JSON line to this file as it "
                        "is taken (kept if the run stops early).")
    args = parser.parse_args(argv)
    try:
        shapes = read_shapes(args.shapes) if args.shapes else []
    except (OSError, ValueError) as exc:
        print(f"gpu_calibration: --shapes: {exc}", file=sys.stderr)
        return 2
    if shapes and not args.table:
        print("gpu_calibration: --shapes: only with --table", file=sys.stderr)
        return 2
    if not HAVE_TORCH:
        print(NO_GPU.format(why="torch is not installed"), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(NO_GPU.format(why="torch.cuda.is_available() is False"), file=sys.stderr)
        return 2
    raw = args.raw.open("w") if args.raw else None
    try:
        calibration = calibrate(args.quick, args.table, shapes, raw)
    except CalibrationError as exc:
        print(f"gpu_calibration: {exc}", file=sys.stderr)
        return 1
    finally:
        if raw is not None:
            raw.close()
    document = {"schema_version": SCHEMA_VERSION, "compute": compute_calibration_to_dict(calibration)}
    args.output.write_text(yaml.safe_dump(document, sort_keys=False))
    gemm_tflops = statistics.median(g.tflops for g in calibration.gemms)
    copy_GBps = max((m.bandwidth_GBps for m in calibration.memory), default=0.0)
    print(f"{calibration.gpu_name}: {len(calibration.gemms)} GEMMs, median {gemm_tflops:.0f} TFLOP/s; "
          f"{len(calibration.layers)} layers; copy {copy_GBps:.0f} GB/s -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
