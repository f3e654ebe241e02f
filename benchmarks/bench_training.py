"""Benchmark: predict one training step of Llama-3-70B with FSDP at 1,024 and 16,384 GPUs, and a
`scale` sweep over 1..1024 nodes (DGX H100, NDR).

Run: python benchmarks/bench_training.py
Targets (issue #4): 1,024 GPUs < 1 s, 16,384 GPUs < 3 s, memory < 2 GiB, scale 1..1024 nodes < 20 s.
The per-step cost does not grow with the GPU count (one representative GPU's streams are simulated;
collectives are priced on the whole communicator in closed form); building the device graph does.
"""

from __future__ import annotations

import resource
import time

from simulator.training.predict import predict_step
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import StrategySpec, TrainingSpec

MODEL = load_model("llama3-70b")


def one(nodes: int, global_batch: int) -> tuple[float, float]:
    training = TrainingSpec(model=MODEL, seq_len=8192, micro_batch=1, global_batch=global_batch,
                            activation_checkpointing="full", strategy=StrategySpec(kind="fsdp"))
    start = time.perf_counter()
    p = predict_step(load_preset("dgx-h100", nodes=nodes), training, MODEL)
    return time.perf_counter() - start, p.step_time_s


def main() -> None:
    for nodes, batch in ((128, 1024), (2048, 16384)):
        wall, step = one(nodes, batch)
        print(f"Llama-3-70B FSDP on {nodes * 8:>6} GPUs: predicted step {step:.2f} s, wall {wall:.2f} s")
    start = time.perf_counter()
    counts = [2**k for k in range(11)]
    for nodes in counts:
        one(nodes, nodes * 8)
    print(f"scale over {counts[0]}..{counts[-1]} nodes ({len(counts)} points): {time.perf_counter() - start:.1f} s")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
