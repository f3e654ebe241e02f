"""Benchmark: predict one training step of Llama-3-70B with FSDP at 1,024 and 16,384 GPUs, a
`scale` sweep over 1..1024 nodes (DGX H100, NDR), Megatron-style 3D layouts (GPT-3 175B with
TP 8 x PP 16 on 1,024 A100s; the SC21 1T model with TP 8 x PP 64 on 3,072) and DeepSeek-V3 with PP 16 x
EP 64 on 2,048 H100s.

Run: python benchmarks/bench_training.py
Targets: 1,024 GPUs < 1 s, 16,384 GPUs < 3 s, memory < 2 GiB, scale 1..1024 nodes < 20 s.
The per-step cost does not grow with the GPU count (one representative GPU's streams are simulated;
collectives are priced on the whole communicator in closed form), nor does the device graph (one server of each
class is built; benchmarks/bench_scale_cost.py).
With pipeline parallelism one GPU per stage is simulated over pp + 2 micro-batches, so the cost
grows as pp^2 x layers / pp.
"""

from __future__ import annotations

import resource
import time

from simulator.training.predict import predict_step
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

MODEL = load_model("llama3-70b")


def one(nodes: int, global_batch: int) -> tuple[float, float]:
    training = TrainingSpec(model=MODEL, seq_len=8192, micro_batch=1, global_batch=global_batch,
                            activation_checkpointing="full", strategy=StrategySpec(kind="fsdp"))
    start = time.perf_counter()
    p = predict_step(load_preset("dgx-h100", nodes=nodes), training, MODEL)
    return time.perf_counter() - start, p.step_time_s


def three_d(model: ModelSpec, nodes: int, tp: int, pp: int, global_batch: int) -> tuple[float, float]:
    training = TrainingSpec(model=model, micro_batch=1, global_batch=global_batch, activation_checkpointing="full",
                            strategy=StrategySpec(kind="zero1"), parallel=ParallelSpec(tp=tp, pp=pp))
    start = time.perf_counter()
    p = predict_step(load_preset("dgx-a100", nodes=nodes), training, model)
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
    gpt_1t = ModelSpec(name="gpt-1t", layers=128, hidden=25600, heads=160, vocab=51200, max_seq_len=2048)
    for model, nodes, tp, pp, batch in ((load_model("gpt3-175b"), 128, 8, 16, 1536), (gpt_1t, 384, 8, 64, 3072)):
        wall, step = three_d(model, nodes, tp, pp, batch)
        print(f"{model.name} TP {tp} x PP {pp} on {nodes * 8:>5} GPUs: predicted step {step:.1f} s, wall {wall:.2f} s")
    deepseek = load_model("deepseek-v3")  # MLA, 3 dense + 58 mixture blocks of 256 experts
    training = TrainingSpec(model=deepseek, seq_len=4096, micro_batch=1, global_batch=15360,
                            activation_checkpointing="full", strategy=StrategySpec(kind="zero1"),
                            parallel=ParallelSpec(pp=16, ep=64, ep_comm_overlap=True))
    start = time.perf_counter()
    p = predict_step(load_preset("dgx-h100", nodes=256), training, deepseek)
    print(f"DeepSeek-V3 PP 16 x EP 64 on 2,048 GPUs: predicted step {p.step_time_s:.1f} s, "
          f"wall {time.perf_counter() - start:.2f} s")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
