"""Where the compute stream's waits are booked (simulator.training.timeline): a transfer queued behind its
own stream books that part to the task ahead of it, so a pipeline's drain is bubble, not transfer time."""

from __future__ import annotations

import pytest

from simulator.network.flows import FlowClass, Resource
from simulator.training.tasks import CollectiveCall, StepPlan, Task
from simulator.training.timeline import simulate_plan

SEND = CollectiveCall("sendrecv", 1 << 20, "pp:1")


def never(task: Task) -> FlowClass:
    raise AssertionError("every transfer here has a fixed time")


def test_a_send_queued_behind_a_waiting_send_books_the_bubble():
    """Stage 0 sends s1 (waits for stage 1's 1 s of compute) then s2 (ready at 0.1 s); its compute b waits for
    s2 from 0.1 s to 1.1 s. Of that second, the two transfers took 0.05 s each ("p2p") and the rest was spent
    waiting for stage 1 ("pipeline_bubble"): 0.9 s, not 1.0 s of "p2p"."""
    tasks = (
        Task("x", "compute", "forward", 1.0, stage=1),
        Task("a", "compute", "forward", 0.1, stage=0),
        Task("s1", "send", "p2p", collective=SEND, deps=("x",), stage=0),
        Task("s2", "send", "p2p", collective=SEND, deps=("a",), stage=0),
        Task("b", "compute", "backward", 2.0, deps=("s2",), stage=0),
    )
    timeline = simulate_plan(StepPlan(tasks, 1), [Resource("net", 1e9)], never, alone_s=lambda task: 0.05)
    assert timeline.critical_stage == 0 and timeline.step_time_s == pytest.approx(3.1)
    assert timeline.compute_waits_s["p2p"] == pytest.approx(0.1)
    assert timeline.compute_waits_s["pipeline_bubble"] == pytest.approx(0.9)
