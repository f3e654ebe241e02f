"""Benchmark: Monte Carlo of a training run through failures (the issue's target: 1,000 runs of a 54-day
16,384-GPU job in under 10 s on 2 cores).

Run: python benchmarks/bench_goodput.py [--runs N] [--simpy N]
Default: Llama 3 405B on 2,048 DGX H100 (16,384 GPUs) with the llama3 failure preset and the optimal
checkpoint interval, at a fixed 6.2 s step (Meta's ~400 TFLOP/s per GPU) and as many tokens as 54
failure-free days take: ~420 failures and ~18,000 checkpoints a run. It prints the time of the vectorised
model (what `predict` runs) and, for --simpy runs, of the SimPy process it reproduces run for run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from simulator.run.montecarlo import simulate
from simulator.run.params import run_params
from simulator.run.process import simulate_process
from simulator.run.spec import RunSpec
from simulator.training.prediction import MemoryBreakdown, StepPrediction
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

STEP_S, TOKENS_PER_STEP = 6.2, 2048 * 8192


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--simpy", type=int, default=3, help="SimPy runs to time (0: none).")
    args = parser.parse_args()
    topology = load_preset("dgx-h100", nodes=2048)
    training = TrainingSpec(model="llama3-405b", seq_len=8192, micro_batch=1, global_batch=2048,
                            strategy=StrategySpec(kind="zero1"),
                            parallel=ParallelSpec(tp=8, pp=16, sequence_parallel=True,
                                                  pipeline_split="embedding_and_loss"))
    step = StepPrediction(step_time_s=STEP_S, compute_s=STEP_S, exposed_comm_s=0.0, idle_breakdown_s={},
                          tokens_per_step=TOKENS_PER_STEP, n_gpus=16384, model_flops_per_step=1.0, peak_tflops=989.0,
                          memory=MemoryBreakdown(0, 0, 0, 0, 0, 0), memory_capacity_bytes=80e9, gpu_tdp_w=700.0)
    run = RunSpec(train_tokens=54 * 86400 / STEP_S * TOKENS_PER_STEP, failures="llama3", runs=args.runs)
    p = run_params(run, topology, training, load_model("llama3-405b"), step)
    start = time.perf_counter()
    samples = simulate(p, args.runs)
    seconds = time.perf_counter() - start
    print(f"{args.runs} runs of a {p.work_s / 86400:.0f}-day 16,384-GPU job (interval {p.interval_s:.0f} s, job MTBF "
          f"{p.job_mtbf_s / 3600:.2f} h): {seconds:.2f} s vectorised; {samples.interruptions.mean():.0f} "
          f"interruptions a run, goodput {np.mean(p.work_s / samples.wall_s):.3f}")
    if args.simpy:
        start = time.perf_counter()
        simulate_process(p, args.simpy)
        each = (time.perf_counter() - start) / args.simpy
        print(f"SimPy process: {each:.2f} s a run ({each * args.runs:.0f} s for {args.runs})")


if __name__ == "__main__":
    main()
