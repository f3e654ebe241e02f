"""Performance sanity check of the flow engine: 1,000 flow classes x 200 resources, sparse usage.

Not a unit test: prints wall-clock figures. Run from the repository root:
`PYTHONPATH=. python benchmarks/bench_network.py` (or with clustersim installed).
Two scenarios: all flows submitted together (one transfer), and flows arriving at random times
(many transfers, so rates are recomputed at ~2 x flows events either way).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from simulator.network import FlowClass, FlowEngine, Resource, max_min_rates, uncontended_time_s

N_FLOWS = 1000
N_RESOURCES = 200
ROUTE_LEN = (2, 6)  # resources per flow class, drawn uniformly in [2, 6)


def random_flows(rng: np.random.Generator) -> tuple[list[Resource], list[FlowClass]]:
    """Resources of 10-50 GB/s and flow classes over random routes of 2-5 resources."""
    resources = [Resource(f"r{i}", float(rng.uniform(10e9, 50e9))) for i in range(N_RESOURCES)]
    flows = []
    for i in range(N_FLOWS):
        route = rng.choice(N_RESOURCES, size=int(rng.integers(*ROUTE_LEN)), replace=False)
        usage = tuple((int(r), float(rng.choice([1.0, 2.0, 4.0]))) for r in np.sort(route))
        flows.append(
            FlowClass(
                f"f{i}",
                size_bytes=float(rng.uniform(1e6, 1e9)),
                usage=usage,
                multiplicity=int(rng.integers(1, 64)),
                latency_s=float(rng.uniform(1e-6, 20e-6)),
            )
        )
    return resources, flows


def main() -> None:
    """Time one max-min solve, the closed form, and the engine in two arrival patterns."""
    rng = np.random.default_rng(0)
    resources, flows = random_flows(rng)
    capacity = np.array([r.capacity_Bps for r in resources])
    usage = np.zeros((N_FLOWS, N_RESOURCES))
    for i, flow in enumerate(flows):
        for r, coef in flow.usage:
            usage[i, r] = coef
    t0 = time.perf_counter()
    max_min_rates(capacity, usage, np.ones(N_FLOWS, dtype=bool))
    print(f"max_min_rates, {N_FLOWS} flows x {N_RESOURCES} resources: {time.perf_counter() - t0:.4f} s")

    t0 = time.perf_counter()
    makespan = uncontended_time_s(flows, resources)
    print(f"uncontended_time_s: {time.perf_counter() - t0:.3f} s wall (simulated {makespan:.4f} s)")

    engine = FlowEngine(resources)
    t0 = time.perf_counter()
    engine.transfer(flows)
    engine.run()
    wall = time.perf_counter() - t0
    print(f"FlowEngine, one transfer of {N_FLOWS} classes: {wall:.3f} s wall ({len(engine.records)} records)")

    engine = FlowEngine(resources)
    starts = np.sort(rng.uniform(0.0, makespan, size=N_FLOWS))

    def submit(env_engine: FlowEngine) -> Generator[simpy.Event, Any, None]:
        for start, flow in zip(starts, flows, strict=True):
            yield env_engine.env.timeout(start - env_engine.env.now)
            env_engine.transfer([flow])

    engine.env.process(submit(engine))
    t0 = time.perf_counter()
    engine.run()
    wall = time.perf_counter() - t0
    print(
        f"FlowEngine, {N_FLOWS} transfers at random times: {wall:.3f} s wall ({len(engine.records)} records)"
    )


if __name__ == "__main__":
    main()
