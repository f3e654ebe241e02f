"""Benchmark: `clustersim plan` search time, and where published layouts rank.

Run: python benchmarks/bench_plan.py [--keep N] [--slack F] [--workers N] [--interleaved]
                                     [--sc21 145.6b,1t] [--modern]
Default: GPT-3 175B on 128 DGX A100 nodes (1,024 GPUs), global batch 1536, the default search space
(target: under 60 s). It prints the layouts enumerated, fitting the memory model, within
the slack and simulated, the time to the first simulation (enumeration, memory filter, estimate) and
in all, and the best five.

--sc21 ROWS also plans rows of Megatron-LM's SC21 Table 1 (Narayanan et al. 2021; GPT, seq 2048, vocab
51200, DGX A100 80GB) and prints the rank of the published (TP, PP) among the plan's TP x PP shapes (each shape ranked
by its best simulated variant of micro-batch and recomputation). The job
is set up as the authors ran it (examples/sc21/run_table_1.sh): fp16, no flash attention, no sequence
parallelism, Megatron's DDP (no optimizer sharding; gradients reduced after the backward above 18.4B), full
recomputation, ranks tp-dp-pp; the plan chooses TP, PP and the micro-batch. --modern searches the default
space instead (bf16, flash attention, SP, ddp/zero1/fsdp), which may well prefer other layouts.
"""

from __future__ import annotations

import argparse
import os
import time

from simulator.training.search import DEFAULT_SLACK, SearchResult, SearchSpace, describe, search_layouts
from simulator.validation.training_parallel import SC21_TABLE_1
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

# Narayanan et al. 2021 (SC21), Table 1, as the validation holds it: name -> (layers, hidden, run).
SC21_ROWS = {run.name.lower(): (layers, hidden, run) for (layers, hidden), run in SC21_TABLE_1.items()}


def _run(model: ModelSpec, nodes: int, base: TrainingSpec, space: SearchSpace,
         args: argparse.Namespace) -> tuple[SearchResult, float, float]:
    topology = load_preset("dgx-a100", nodes=nodes)
    started: list[float] = []
    start = time.perf_counter()
    result = search_layouts(topology, base, model, space, args.keep, args.slack, args.workers,
                            on_start=lambda n: started.append(time.perf_counter()))
    total = time.perf_counter() - start
    return result, (started[0] - start) if started else total, total


def _sc21(name: str, args: argparse.Namespace) -> None:
    layers, hidden, run = SC21_ROWS[name.lower()]
    published = (run.tp, run.pp)
    model = ModelSpec(name=f"gpt-{name}", layers=layers, hidden=hidden, heads=run.heads, vocab=51200, max_seq_len=2048,
                      learned_positions=True, tied_embeddings=True, bias=True, source="Narayanan et al. 2021")
    if args.modern:
        base = TrainingSpec(model=model.name, global_batch=run.global_batch, seq_len=2048)
        space = SearchSpace(interleaved=args.interleaved)
    else:
        base = TrainingSpec(model=model.name, global_batch=run.global_batch, seq_len=2048, precision="fp16",
                            flash_attention=False,
                            strategy=StrategySpec(kind="ddp", overlap_grad_reduce=run.torch_ddp,
                                                  fp32_grad_copy=True),
                            parallel=ParallelSpec(placement="tp-dp-pp"))
        space = SearchSpace(strategies=("ddp",), recompute=("full",), sequence_parallel=(False,),
                            interleaved=args.interleaved)
    result, _, total_s = _run(model, run.gpus // 8, base, space, args)
    shapes = list(dict.fromkeys((r.layout.tp, r.layout.pp) for r in result.ranked))  # best variant of each
    rank = shapes.index(published) + 1 if published in shapes else None
    print(f"SC21 {name} on {run.gpus} GPUs, batch {run.global_batch} ({'modern' if args.modern else 'as run'}): "
          f"published "
          f"TP{published[0]} PP{published[1]} ranks {rank or 'not among the ' + str(len(shapes))} of "
          f"{len(shapes)} TP x PP shapes ({result.predicted} layouts simulated, {total_s:.1f} s)")
    for i, r in enumerate(result.ranked[:5], start=1):
        print(f"  {i}. {describe(r.layout)}: {r.prediction.tflops_per_gpu:.1f} TFLOP/s/GPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=int, default=24)
    parser.add_argument("--slack", type=float, default=DEFAULT_SLACK)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--interleaved", action="store_true")
    parser.add_argument("--sc21", default="", help=f"comma-separated rows: {','.join(SC21_ROWS)}")
    parser.add_argument("--modern", action="store_true", help="--sc21 with the default search space")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; keep {args.keep}, slack {args.slack}, workers {args.workers}, "
          f"interleaved {args.interleaved}")
    base = TrainingSpec(model="gpt3-175b", global_batch=1536)
    result, prefilter_s, total_s = _run(load_model("gpt3-175b"), 128, base, SearchSpace(interleaved=args.interleaved),
                                        args)
    print(f"gpt3-175b, 128 x DGX A100 (1024 GPUs), global batch 1536: {result.enumerated} enumerated, "
          f"{result.fit_in_memory} fit in memory, {result.promising} within the slack, {result.predicted} simulated "
          f"({len(result.ranked)} fit, {len(result.failed)} refused); {prefilter_s:.2f} s to the first simulation, "
          f"{total_s:.1f} s in all")
    for rank, r in enumerate(result.ranked[:5], start=1):
        print(f"  {rank}. {describe(r.layout)}: {r.prediction.tokens_per_s:,.0f} tokens/s, "
              f"{r.prediction.tflops_per_gpu:.1f} TFLOP/s/GPU, step {r.prediction.step_time_s:.2f} s")
    for name in filter(None, args.sc21.split(",")):
        _sc21(name.strip(), args)


if __name__ == "__main__":
    main()
