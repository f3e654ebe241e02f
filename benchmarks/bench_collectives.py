"""Benchmark: an nccl-tests-style all_reduce sweep (8 B - 8 GiB, 31 sizes) at 128 and 2,048 nodes.

Run: python benchmarks/bench_collectives.py
Prints, per cluster size, the time to build the topology graph, to derive the communicator view,
and to predict the sweep (closed form, and through the SimPy flow engine), plus peak memory.
The cost of a prediction does not depend on the GPU count (symmetric ranks collapse to one flow
class), so the sweep time should be flat from 1,024 to 16,384 GPUs; the graph build is the part
that grows (linearly in devices).
"""

from __future__ import annotations

import resource
import time

from simulator.collectives.comm import comm_view
from simulator.collectives.predict import collective_table, size_sweep
from topologies.build import build
from topologies.presets import load_preset


def bench(nodes: int) -> dict[str, float]:
    t0 = time.perf_counter()
    topology = build(load_preset("dgx-h100", nodes=nodes))
    t1 = time.perf_counter()
    view = comm_view(topology)
    t2 = time.perf_counter()
    sizes = size_sweep(8, 8 * 1024**3, 2)
    collective_table(view, "all_reduce", sizes)
    t3 = time.perf_counter()
    collective_table(view, "all_reduce", sizes, use_engine=True)
    t4 = time.perf_counter()
    return {"build_s": t1 - t0, "view_s": t2 - t1, "sweep_s": t3 - t2, "sweep_engine_s": t4 - t3,
            "total_s": t4 - t0}


def main() -> None:
    results = {nodes: bench(nodes) for nodes in (128, 2048)}
    print(f"{'nodes':>6} {'GPUs':>7} {'build s':>8} {'view s':>7} {'sweep s':>8} {'engine s':>9} {'total s':>8}")
    for nodes, r in results.items():
        print(f"{nodes:>6} {nodes * 8:>7} {r['build_s']:8.3f} {r['view_s']:7.3f} {r['sweep_s']:8.3f} "
              f"{r['sweep_engine_s']:9.3f} {r['total_s']:8.3f}")
    ratio = results[2048]["sweep_s"] / results[128]["sweep_s"]
    print(f"sweep cost ratio 2048/128 nodes: {ratio:.2f} (16x the GPUs)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
