"""Running a step plan through SimPy: streams, dependencies, and collectives sharing the links.

Each stream is a SimPy process that takes its tasks in order; a task waits for its dependencies,
then runs: a compute task for its duration, a collective as a flow class on the shared flow
engine (simulator.network), so collectives on different streams (FSDP's all-gather of the next
block and reduce-scatter of the previous one) share bandwidth by max-min fairness. Compute that
starts while a collective is in flight runs OVERLAP_SLOWDOWN slower: NCCL's kernels occupy SMs
(8-32 channels of one SM each out of ~100-140) and HBM bandwidth (DESIGN.md section 7).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import simpy

from simulator.network.engine import FlowEngine
from simulator.network.flows import FlowClass, Resource
from simulator.training.plan import CollectiveCall, StepPlan, Task

OVERLAP_SLOWDOWN = 0.10


@dataclass(frozen=True)
class Span:
    """One task as it ran: stream, label, start and end (seconds from the step's start)."""

    name: str
    stream: str
    label: str
    start_s: float
    end_s: float
    size_bytes: int = 0
    # a collective's average load on each resource ("intra", "net", "spine") while it ran, as a
    # fraction of the resource's achievable rate
    resource_load: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Timeline:
    spans: tuple[Span, ...]
    compute_waits_s: dict[str, float]  # compute-stream waiting, by what it waited for
    step_time: float | None = None  # set when the spans cover only part of the step (extrapolated)
    busy: float | None = None

    @property
    def step_time_s(self) -> float:
        return self.step_time if self.step_time is not None else max(span.end_s for span in self.spans)

    @property
    def compute_s(self) -> float:
        if self.busy is not None:
            return self.busy
        return sum(s.end_s - s.start_s for s in self.spans if s.stream == "compute")


def simulate_plan(plan: StepPlan, resources: list[Resource],
                  flow_of: Callable[[CollectiveCall, str], FlowClass]) -> Timeline:
    """Run the plan (see module docstring); `flow_of` turns a collective call into a flow class."""
    env = simpy.Environment()
    engine = FlowEngine(resources, env)
    done = {task.name: env.event() for task in plan.tasks}
    label_of = {task.name: task.label for task in plan.tasks}
    spans: list[Span] = []
    waits: dict[str, float] = {}
    in_flight = [0]

    def run(tasks: list[Task]) -> Generator[simpy.Event, Any, None]:
        for task in tasks:
            pending = [done[d] for d in task.deps if not done[d].triggered]
            if pending:
                asked = env.now
                yield env.all_of(pending)
                if task.stream == "compute" and env.now > asked:
                    blocker = max((d for d in task.deps), key=lambda d: finished.get(d, 0.0))
                    waits[label_of[blocker]] = waits.get(label_of[blocker], 0.0) + env.now - asked
            start = env.now
            if task.collective is not None:
                in_flight[0] += 1
                yield engine.transfer([flow_of(task.collective, task.name)])
                in_flight[0] -= 1
            else:
                slow = 1.0 + OVERLAP_SLOWDOWN if in_flight[0] else 1.0
                yield env.timeout(task.duration_s * slow)
            finished[task.name] = env.now
            size = task.collective.size_bytes if task.collective else 0
            spans.append(Span(task.name, task.stream, task.label, start, env.now, size))
            done[task.name].succeed()

    finished: dict[str, float] = {}
    streams: dict[str, list[Task]] = {}
    for task in plan.tasks:
        streams.setdefault(task.stream, []).append(task)
    for tasks in streams.values():
        env.process(run(tasks))
    env.run()
    missing = [name for name, event in done.items() if not event.triggered]
    if missing:
        raise RuntimeError(f"step plan deadlocked at {missing[:3]} (a dependency cycle in the plan)")
    return Timeline(tuple(spans), waits)
