"""Running a step plan through SimPy: streams, dependencies, and collectives sharing the links.

Each stream of each pipeline stage's representative GPU is a SimPy process that takes its tasks in
order; a task waits for its dependencies, then runs: a compute task for its duration, a collective
as a flow class on the shared flow engine (simulator.network), so collectives on different streams
(FSDP's all-gather of the next block and reduce-scatter of the previous one, a stage's gradient
reduction and its activation sends) share bandwidth by max-min fairness. Every stage has its own
block of resources (its GPU's links and its share of the NICs); a flow loads its sending stage's.
Compute runs OVERLAP_SLOWDOWN slower for as long as a collective of the same stage is in flight:
NCCL's kernels occupy SMs (8-32 channels of one SM each out of ~100-140) and HBM bandwidth. The
figure is a measurement: "Characterizing Compute-Communication Overlap in
GPU-Accelerated Distributed Deep Learning" (arXiv 2507.03114, 2025) found compute 18.9% slower on
average (up to 40%) while collectives overlapped it, over GPT and Llama training on 4 A100, H100,
MI250 and MI210 GPUs. It applies to the collectives NCCL's kernels run beside the compute (data-parallel
gathers and reductions, pipeline sends, context-parallel rings), not to a pass's TP collectives
(PAIRED_STREAMS).

What the compute stream waits for is booked under the label of the task it waited on, from that
task's start on; before it started, under what that task was itself waiting for, and so on: a
transfer that waited for the neighbouring stage's compute books the wait before it as
"pipeline_bubble", the transfer itself as "p2p", a transfer that waited for this stage's TP
collective books that part as "tp_comm"; a transfer that was ready but queued behind its own stream
books that part to the task ahead of it, and so on (a send behind sends that wait for the
neighbouring stage: the bubble). A compute pass whose collectives overlap it stalls, after
its work, for what those collectives take beyond the compute they hide behind (given by the caller:
TP collectives beyond the GEMMs they are decomposed with, see simulator.training.tasks.PAIRED_GEMMS;
the context-parallel ring beyond the attention of each block), booked under the collective's label
("tp_comm", "cp_comm"). A stage that finishes before the step ends waits for the pipeline to drain:
bubble as well.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

import simpy

from simulator.network.engine import FlowEngine
from simulator.network.flows import FlowClass, Resource
from simulator.training.tasks import StepPlan, Task

OVERLAP_SLOWDOWN = 0.189  # arXiv 2507.03114: average compute slowdown under overlapped collectives
# streams whose collectives do not slow the compute beside them: a pass's TP (and expert) collectives, which
# either follow their GEMM or, overlapped, are decomposed with it (Transformer Engine's userbuffers on a few
# SMs, torch's async TP on copy engines) and priced against that GEMM (tasks.PAIRED_GEMMS)
PAIRED_STREAMS = frozenset({"tp"})


@dataclass(frozen=True)
class Span:
    """One task as it ran: stream, label, start and end (seconds from the step's start)."""

    name: str
    stream: str
    label: str
    start_s: float
    end_s: float
    size_bytes: int = 0
    stage: int = 0  # pipeline stage of the GPU that ran it
    # a collective's average load on each resource ("intra", "net", "spine") while it ran, as a
    # fraction of the resource's achievable rate
    resource_load: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class RepeatedMicroSteps:
    """The micro-steps of a step that were not simulated (simulator.training.predict.steady_state_step):
    after the `simulated` micro-steps that the spans show, `periods` more periods of `period` micro-steps
    each add `period_s` to the step, exactly as the last simulated period did."""

    simulated: int
    period: int
    periods: int
    period_s: float

    @property
    def total_s(self) -> float:
        """The time the repeated micro-steps add: the step time beyond the spans' end."""
        return self.periods * self.period_s

    @property
    def micro_steps(self) -> int:
        return self.periods * self.period


@dataclass(frozen=True)
class Timeline:
    """The spans of a step and what the critical GPU's compute stream waited for. The critical GPU
    is the pipeline stage with the most compute (the only stage without pipeline parallelism)."""

    spans: tuple[Span, ...]
    compute_waits_s: dict[str, float]  # the critical stage's compute-stream waiting, by what it waited for
    step_time: float | None = None  # set when the spans cover only part of the step (extrapolated)
    busy: float | None = None
    critical_stage: int = 0
    repeated: RepeatedMicroSteps | None = None  # what the extrapolation added beyond the spans

    @property
    def step_time_s(self) -> float:
        return self.step_time if self.step_time is not None else max(span.end_s for span in self.spans)

    @property
    def compute_s(self) -> float:
        if self.busy is not None:
            return self.busy
        return busy_by_stage(self.spans).get(self.critical_stage, 0.0)


def busy_by_stage(spans: tuple[Span, ...]) -> dict[int, float]:
    """Compute-stream busy seconds of each stage."""
    busy: dict[int, float] = {}
    for span in spans:
        if span.stream == "compute":
            busy[span.stage] = busy.get(span.stage, 0.0) + span.end_s - span.start_s
    return busy


def simulate_plan(plan: StepPlan, stage_resources: list[Resource],
                  flow_of: Callable[[Task], FlowClass],
                  alone_s: Callable[[Task], float | None] | None = None,
                  stall_s: Callable[[Task], dict[str, float]] | None = None) -> Timeline:
    """Run the plan (see module docstring). `stage_resources` is one stage's block of resources;
    `flow_of` turns a collective task into a flow class over that block's indices. `alone_s` may
    give a collective's time when nothing can share its resources (the flow engine would give the
    same closed form): it then skips the engine, which is what costs time in deep pipelines.
    `stall_s` gives how long a compute pass with overlapped collectives (`Task.overlaps`) waits for
    them beyond its own work, by the collectives' label: the stream stalls that long after the work,
    booked under those labels."""
    env = simpy.Environment()
    stages = 1 + max(task.stage for task in plan.tasks)
    # stages share no resource (a transfer loads its sender's), so each gets its own, smaller, engine
    engines = [FlowEngine([replace(r, name=f"s{k}.{r.name}") for r in stage_resources], env) for k in range(stages)]
    done = {task.name: env.event() for task in plan.tasks}
    by_name = {task.name: task for task in plan.tasks}
    spans: list[Span] = []
    waits: dict[int, dict[str, float]] = {k: {} for k in range(stages)}
    in_flight = [0] * stages
    changed = [env.event() for _ in range(stages)]  # fires when a stage's collectives in flight change
    started: dict[str, float] = {}
    finished: dict[str, float] = {}
    streams: dict[tuple[int, str], list[Task]] = {}
    for task in plan.tasks:
        streams.setdefault((task.stage, task.stream), []).append(task)
    previous = {task.name: tasks[i - 1] for tasks in streams.values() for i, task in enumerate(tasks) if i}

    def book(stage: int, label: str, seconds: float) -> None:
        if seconds > 0:
            waits[stage][label] = waits[stage].get(label, 0.0) + seconds

    def last_done(task: Task) -> Task:
        return by_name[max(task.deps, key=lambda d: finished.get(d, 0.0))]

    def attribute(stage: int, begin: float, end: float, blocker: Task) -> None:
        """Book the compute stream's wait [begin, end] on `blocker`, the dependency that finished
        last: from its start on, to its label; before, to what it was itself waiting for (a
        transfer waits for the neighbouring stage's compute: the pipeline bubble)."""
        while True:
            if blocker.collective is None:  # another stage's compute
                book(stage, "pipeline_bubble", end - begin)
                return
            split = min(max(begin, started[blocker.name]), end)
            book(stage, blocker.label, end - split)
            if split <= begin:
                return
            if not blocker.deps or finished.get(last_done(blocker).name, 0.0) <= begin:
                # ready before the wait began, it queued behind its own stream: the task ahead of it
                # held it (a send behind sends that wait for this stage's neighbour: the bubble)
                ahead = previous.get(blocker.name)
                if ahead is None or finished.get(ahead.name, 0.0) <= begin:
                    book(stage, blocker.label, split - begin)
                    return
                blocker, end = ahead, split
                continue
            blocker, end = last_done(blocker), split

    def flight(stage: int, delta: int) -> None:
        """Count the stage's collectives in flight and wake its compute to re-pace itself."""
        in_flight[stage] += delta
        event, changed[stage] = changed[stage], env.event()
        event.succeed()

    def compute(task: Task) -> Generator[simpy.Event, Any, None]:
        """Run `task.duration_s` of work, OVERLAP_SLOWDOWN slower while a collective is in flight."""
        left = task.duration_s
        while left > 0.0:
            slow = 1.0 + OVERLAP_SLOWDOWN if in_flight[task.stage] else 1.0
            began, finish = env.now, env.timeout(left * slow)
            yield finish | changed[task.stage]
            if finish.processed:
                return
            left -= (env.now - began) / slow

    def run(tasks: list[Task]) -> Generator[simpy.Event, Any, None]:
        for task in tasks:
            pending = [done[d] for d in task.deps if not done[d].triggered]
            if pending:
                asked = env.now
                yield env.all_of(pending)
                if task.stream == "compute" and env.now > asked:
                    attribute(task.stage, asked, env.now, last_done(task))
            start = started[task.name] = env.now
            if task.collective is not None:
                nccl = task.stream not in PAIRED_STREAMS
                if nccl:
                    flight(task.stage, +1)
                fixed = alone_s(task) if alone_s is not None else None
                yield env.timeout(fixed) if fixed is not None else engines[task.stage].transfer([flow_of(task)])
                if nccl:
                    flight(task.stage, -1)
            else:
                yield from compute(task)
            end = env.now
            stalls = stall_s(task) if stall_s is not None and task.overlaps else {}
            stall = sum(stalls.values())
            if stall > 0.0:
                yield env.timeout(stall)
                for label, seconds in stalls.items():
                    book(task.stage, label, seconds)
            finished[task.name] = env.now
            size = task.collective.size_bytes * task.collective.count if task.collective else 0
            spans.append(Span(task.name, task.stream, task.label, start, end, size, task.stage))
            done[task.name].succeed()

    for tasks in streams.values():
        env.process(run(tasks))
    env.run()
    missing = [name for name, event in done.items() if not event.triggered]
    if missing:
        raise RuntimeError(f"step plan deadlocked at {missing[:3]} (a dependency cycle in the plan)")
    busy = busy_by_stage(tuple(spans))
    critical = max(range(stages), key=lambda k: (busy.get(k, 0.0), -k))
    if stages > 1:  # a stage done before the others waits for the pipeline to drain: bubble too
        last = max(span.end_s for span in spans if span.stage == critical and span.stream == "compute")
        book(critical, "pipeline_bubble", max(span.end_s for span in spans) - last)
    return Timeline(tuple(spans), waits[critical], critical_stage=critical)
