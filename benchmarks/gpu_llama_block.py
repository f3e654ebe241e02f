"""Time one Llama decoder block forward and forward + backward on an NVIDIA GPU, as PyTorch code runs it eager
and under torch.compile, to check the compute model's element-wise bytes (simulator.training.compute:
ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN for fused kernels, ELEMENTWISE_EAGER_BYTES_PER_TOKEN_HIDDEN for eager ones).

Run: python benchmarks/gpu_llama_block.py -o llama_blocks.yaml
(on a machine with an NVIDIA GPU and torch; CUDA device 0; from a checkout without `pip install -e .`, prefix
PYTHONPATH=.; about a minute on an H100, most of it compiling). Timing and skipping as benchmarks/gpu_calibration.py
does; --raw FILE keeps each point as a JSON line as it is taken.

The block is the Llama 2/3 architecture written the way the reference code and eager PyTorch trainers write it:
x + wo(attention(rope(wq(n1(x))), rope(wk(n1(x))), wv(n1(x)))), then + w2(silu(w1(n2(x))) * w3(n2(x))),
bf16 weights and activations, RMSNorm computed in fp32 and cast back, rotary embeddings as a complex product in
fp32, grouped-query keys and values repeated to every head (expand + reshape, a copy), causal attention through
scaled_dot_product_attention's FlashAttention-2 backend. Variants, each a point:
- eager: as above, every element-wise step its own kernel(s);
- eager-fused-norm: torch's fused RMSNorm (torch.nn.functional.rms_norm) instead of the fp32 one;
- compiled: the eager block under torch.compile (Inductor fuses the element-wise steps; it generates no code for
  the complex product of the rotary embedding, which it warns about and runs as a kernel of its own);
- bare: the norms, rotary and the repeat left out and silu(w1) * w3 replaced by the product w1 * w3: the
  block's GEMMs and attention with one element-wise product, the floor the others add to.
Each time is the median of REPEATS CUDA-event timings after WARMUP calls. The file records the GPU, CUDA and
torch versions and the date.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from gpu_calibration import median_time_s, run_points

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    HAVE_TORCH = False
else:
    HAVE_TORCH = True

WARMUP, REPEATS = 5, 20
VARIANTS = ("eager", "eager-fused-norm", "compiled", "bare")


@dataclass(frozen=True)
class Block:
    """A Llama block's shape (its model's config.json) and the micro-batch it runs."""

    model: str
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    seq_len: int
    micro_batch: int


# Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json: hidden 4096, 32 heads, 8 KV heads, intermediate 14336) and
# Llama 2 7B (meta-llama/Llama-2-7b-hf: 4096, 32, 32, 11008), at the sequence lengths they were trained at
BLOCKS = (Block("llama3-8b", 4096, 32, 8, 14336, 8192, 1), Block("llama3-8b", 4096, 32, 8, 14336, 4096, 2),
          Block("llama2-7b", 4096, 32, 32, 11008, 4096, 2), Block("llama2-7b", 4096, 32, 32, 11008, 2048, 4))


def rms_norm_fp32(x: Any, weight: Any) -> Any:
    """RMSNorm as the Llama reference code computes it: in fp32, cast back, times the weight."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * weight


def rotary(x: Any, freqs: Any) -> Any:
    """Rotary embedding as a complex product in fp32 over pairs of a head's features."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * freqs).flatten(3).type_as(x)


def block_forward(w: dict[str, Any], x: Any, block: Block, variant: str, freqs: Any) -> Any:
    """One block's output for input x [b, s, h] (module docstring)."""
    b, s, h = x.shape
    d = h // block.heads
    bare = variant == "bare"

    def norm(y: Any, weight: Any) -> Any:
        if bare:
            return y
        return F.rms_norm(y, (h,), weight, 1e-5) if variant == "eager-fused-norm" else rms_norm_fp32(y, weight)

    n1 = norm(x, w["n1"])
    q = (n1 @ w["wq"].t()).view(b, s, block.heads, d)
    k = (n1 @ w["wk"].t()).view(b, s, block.kv_heads, d)
    v = (n1 @ w["wv"].t()).view(b, s, block.kv_heads, d)
    if not bare:
        q, k = rotary(q, freqs), rotary(k, freqs)
        rep = block.heads // block.kv_heads
        if rep > 1:
            k = k[:, :, :, None, :].expand(b, s, block.kv_heads, rep, d).reshape(b, s, block.heads, d)
            v = v[:, :, :, None, :].expand(b, s, block.kv_heads, rep, d).reshape(b, s, block.heads, d)
        enable_gqa = False
    else:
        enable_gqa = block.kv_heads != block.heads
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True, enable_gqa=enable_gqa)
    x = x + out.transpose(1, 2).reshape(b, s, h) @ w["wo"].t()
    n2 = norm(x, w["n2"])
    gate, up = n2 @ w["w1"].t(), n2 @ w["w3"].t()
    return x + ((gate if bare else F.silu(gate)) * up) @ w["w2"].t()


def measure(block: Block, variant: str) -> dict[str, Any]:
    """Forward and forward + backward seconds of one block variant (weight and input gradients)."""
    h, f, d = block.hidden, block.ffn_hidden, block.hidden // block.heads
    shapes = {"wq": (h, h), "wk": (block.kv_heads * d, h), "wv": (block.kv_heads * d, h), "wo": (h, h),
              "w1": (f, h), "w3": (f, h), "w2": (h, f), "n1": (h,), "n2": (h,)}
    w = {name: (torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
         for name, shape in shapes.items()}
    angles = torch.outer(torch.arange(block.seq_len, device="cuda", dtype=torch.float32),
                         1.0 / 500000.0 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    freqs = torch.polar(torch.ones_like(angles), angles)[None, :, None, :]
    x = torch.randn(block.micro_batch, block.seq_len, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad_out = torch.randn_like(x)
    forward = torch.compile(block_forward, dynamic=False) if variant == "compiled" else block_forward

    def step() -> None:
        for t in (*w.values(), x):
            t.grad = None
        forward(w, x, block, variant, freqs).backward(grad_out)

    def forward_only() -> None:
        with torch.no_grad():
            forward(w, x, block, variant, freqs)

    return {**block.__dict__, "variant": variant, "forward_s": median_time_s(forward_only, WARMUP, REPEATS),
            "fwd_bwd_s": median_time_s(step, WARMUP, REPEATS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-o", "--output", required=True, type=Path, help="YAML file to write.")
    parser.add_argument("--raw", type=Path, help="Also write each point as a JSON line to this file as it is taken "
                        "(kept if the run stops early).")
    args = parser.parse_args(argv)
    if not HAVE_TORCH or not torch.cuda.is_available():
        print("gpu_llama_block: no CUDA GPU visible; run this on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    document = {"gpu_name": torch.cuda.get_device_name(0), "cuda_version": torch.version.cuda,
                "torch_version": str(torch.__version__), "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "warmup": WARMUP, "repeats": REPEATS}
    raw = args.raw.open("w") if args.raw else None
    try:
        points = run_points("block (shape, variant)", measure, [(b, v) for b in BLOCKS for v in VARIANTS], raw)
    finally:
        if raw is not None:
            raw.close()
    if not points:
        return 1
    args.output.write_text(yaml.safe_dump({**document, "points": points}, default_flow_style=None, width=200,
                                          sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
