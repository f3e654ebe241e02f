"""Benchmark: the cost of one prediction as the cluster grows. The same job (Llama-2-7B, FSDP full shard,
micro-batch 2 x 8 accumulation steps, sequence 4,096) on 8 to 2,048 DGX H100 servers (64 to 16,384 GPUs);
each measurement runs in a fresh process (nothing cached from another size) after a prediction on one server
(which reads the hardware tables and presets every prediction shares), timing `predict_step` from the specs to
the prediction, best of 3; the peak memory the call allocates (tracemalloc) is taken in a run of
its own (tracing slows the call).

Run: python benchmarks/bench_scale_cost.py [--faults]
     (--faults adds a degraded NIC on the last server and a degraded leaf: three server classes)
Targets: 16,384 GPUs cost at most 1.5x the time and 1.3x the peak memory of 1,024 GPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc

from simulator.training.predict import predict_step
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import StrategySpec, TrainingSpec

GPU_COUNTS = (64, 1024, 4096, 16384)
GPUS_PER_SERVER = 8
RUNS = 3


def _predict(gpus: int, faults: bool, trace: bool) -> dict[str, float]:
    """One prediction in this process: its wall time, or its peak traced allocation."""
    nodes = gpus // GPUS_PER_SERVER
    link_faults = [{"device": f"s{nodes - 1}/nic3", "factor": 0.5}, {"device": "leaf0", "factor": 0.5}]
    if not faults:
        link_faults = []
    model = load_model("llama2-7b")
    training = TrainingSpec(model=model, seq_len=4096, micro_batch=2, grad_accum=8, strategy=StrategySpec(kind="fsdp"))
    predict_step(load_preset("dgx-h100", nodes=1), training, model)  # tables and presets read once per process
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    predict_step(load_preset("dgx-h100", nodes=nodes, link_faults=link_faults), training, model)
    wall_s = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    return {"wall_s": wall_s, "peak_bytes": float(peak)}


def _in_child(gpus: int, faults: bool, trace: bool) -> dict[str, float]:
    args = [sys.executable, __file__, "--child", str(gpus), str(int(faults)), str(int(trace))]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def main() -> None:
    faults = "--faults" in sys.argv
    rows = {}
    for gpus in GPU_COUNTS:
        wall_s = min(_in_child(gpus, faults, trace=False)["wall_s"] for _ in range(RUNS))
        peak = _in_child(gpus, faults, trace=True)["peak_bytes"]
        rows[gpus] = (wall_s, peak)
    base_s, base_peak = rows[1024]
    print(f"Llama-2-7B FSDP, micro-batch 2 x 8, DGX H100{' with 2 faults' if faults else ''} (best of {RUNS}):")
    print(f"{'GPUs':>7} {'wall ms':>8} {'peak MiB':>9} {'time / 1,024':>13} {'memory / 1,024':>15}")
    for gpus, (wall_s, peak) in rows.items():
        ratios = f"{wall_s / base_s:>13.2f} {peak / base_peak:>15.2f}"
        print(f"{gpus:>7,} {wall_s * 1e3:>8.0f} {peak / 2**20:>9.1f} {ratios}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(_predict(int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1")))
    else:
        main()
