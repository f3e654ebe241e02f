"""Benchmark: sweep throughput on the local process pool, in scenarios per second per core.

Run: python benchmarks/bench_sweep.py [SWEEP.yaml] [--workers N]
Default: examples/sweep-small.yaml (24 scenarios: Llama-2-7B, 1-8 DGX H100 nodes, 3 strategies,
2 fabrics) on every core. The figure includes starting the pool (spawned workers import the
simulator and warm its caches), so a larger sweep amortises that and scores higher.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import yaml

from simulator.sweep import expand, run_sweep, sweep_from_data

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", nargs="?", type=Path, default=ROOT / "examples" / "sweep-small.yaml")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    start = time.perf_counter()
    scenarios = expand(sweep_from_data(yaml.safe_load(args.sweep.read_text()), str(args.sweep)))
    expand_s = time.perf_counter() - start
    failed: list[str] = []
    summary = run_sweep(scenarios, workers=args.workers, scheduler=None, done=set(),
                        on_result=lambda row: failed.extend([row["error"]] if row["error"] else []))
    rate = summary.scenarios_per_s
    print(f"{args.sweep.name}: {len(scenarios)} scenarios expanded in {expand_s:.2f} s; run on {args.workers} "
          f"workers in {summary.seconds:.1f} s ({len(failed)} failed): {rate:.1f} scenarios/s, "
          f"{rate / args.workers:.2f} scenarios/s per core")


if __name__ == "__main__":
    main()
