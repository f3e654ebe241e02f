"""Metamorphic tests of pricing one server per class: a fault or a straggler on any server (the first, one in
the middle, the last, one in another scalable unit) gives the same step as on another server of its class,
since a prediction builds only one server of each class (topologies.build.build_representative)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.training.pace import NOMINAL, Pace
from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import StrategySpec, TrainingSpec

LLAMA_7B = load_model("llama2-7b")
# 64 DGX H100 servers: two scalable units of 32 on rail leaves, under spines
NODES = 64
FSDP = TrainingSpec(model="llama2-7b", seq_len=2048, micro_batch=2, grad_accum=4, strategy=StrategySpec(kind="fsdp"))
SERVERS = st.sampled_from([0, 1, 31, 32, 63]) | st.integers(0, NODES - 1)


def step(faults: list[tuple[str, float]] = (), pace: Pace = NOMINAL) -> StepPrediction:  # type: ignore[assignment]
    topology = load_preset("dgx-h100", nodes=NODES, link_faults=[{"device": d, "factor": f} for d, f in faults])
    return predict_step(topology, FSDP, LLAMA_7B, pace=pace)


def numbers(p: StepPrediction) -> tuple[object, ...]:
    """What a prediction says, less the names of the servers its classes hold."""
    return (p.step_time_s, p.compute_s, p.exposed_comm_s, p.idle_breakdown_s, p.comm_by_collective_s, p.gpu_idle_s,
            sorted((c["gpus"], c["idle_s"]) for c in p.gpu_idle_by_class.values()))


NIC_ON_S5 = numbers(step([("s5/nic2", 0.5)]))
GPU_ON_S5 = numbers(step([("s5/gpu6", 0.5)]))
LEAF_UNIT_0 = numbers(step([("leaf2", 0.5)]))  # rail 2 of servers 0-31
SLOW_S5 = numbers(step(pace=Pace(slow_ranks=tuple((r, 1.1) for r in range(40, 48)))))
SLOW_S5_GPU3 = numbers(step(pace=Pace(slow_ranks=((43, 1.2),))))


@settings(max_examples=4, deadline=None)
@given(server=SERVERS)
def test_a_degraded_nic_gives_the_same_step_on_any_server(server: int) -> None:
    """NIC 2 at half rate on any server: the same numbers as on s5 (its class is priced on its own links)."""
    assert numbers(step([(f"s{server}/nic2", 0.5)])) == NIC_ON_S5


@settings(max_examples=4, deadline=None)
@given(server=SERVERS)
def test_a_degraded_gpu_gives_the_same_step_on_any_server(server: int) -> None:
    """GPU 6's links at half rate on any server: the same numbers as on s5."""
    assert numbers(step([(f"s{server}/gpu6", 0.5)])) == GPU_ON_S5


def test_a_degraded_rail_leaf_gives_the_same_step_in_either_unit() -> None:
    """Rail 2's leaf of the first unit (leaf2) or of the second (leaf10) at half rate: the same numbers."""
    assert numbers(step([("leaf10", 0.5)])) == LEAF_UNIT_0


@settings(max_examples=4, deadline=None)
@given(server=SERVERS)
def test_a_slow_server_gives_the_same_step_wherever_it_is(server: int) -> None:
    """Every GPU of one server 10% slower (`--straggler sN=1.1`): the same numbers as on s5."""
    pace = Pace(slow_ranks=tuple((r, 1.1) for r in range(8 * server, 8 * server + 8)))
    assert numbers(step(pace=pace)) == SLOW_S5


@settings(max_examples=4, deadline=None)
@given(server=SERVERS, gpu=st.integers(0, 7))
def test_a_slow_gpu_gives_the_same_step_wherever_it_is(server: int, gpu: int) -> None:
    """One GPU 20% slower, on any server: the same numbers as GPU 3 of s5."""
    assert numbers(step(pace=Pace(slow_ranks=((8 * server + gpu, 1.2),)))) == SLOW_S5_GPU3


def test_a_straggler_beside_a_fault_is_the_same_anywhere() -> None:
    """A degraded NIC on the last server and a slow GPU on the first equal the same on servers 30 and 33."""
    here = step([("s63/nic0", 0.25)], Pace(slow_ranks=((0, 1.3),)))
    there = step([("s30/nic0", 0.25)], Pace(slow_ranks=((8 * 33 + 5, 1.3),)))
    assert numbers(here) == numbers(there)
    assert here.step_time_s > step().step_time_s
