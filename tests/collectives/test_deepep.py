"""DeepEP's expert all-to-alls (simulator.collectives.deepep): a token crosses the network once per node holding one
of its experts, then NVLink. Expected values are hand-computed from the module's formulas; the training step takes
them where a job names DeepEP's dispatcher (ParallelSpec.ep_dispatcher)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.deepep import DEEPEP_NVLINK_EFFICIENCY, deepep_estimate, remote_nodes_per_token
from simulator.collectives.nccl_setup import DEFAULT_NCCL
from simulator.collectives.params import prior_params
from simulator.core.errors import ConfigError
from simulator.training.predict import predict_step
from simulator.training.tasks import ep_calls
from tests.collectives.test_collective_model import view
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

MIXTRAL = load_model("mixtral-8x7b")  # top-2 of 8 experts, hidden 4096


def test_remote_nodes_a_token_reaches():
    """(N - 1) (1 - (1 - 1/N)^k): top-8 over 4 nodes 3 x (1 - 0.75^8) = 2.6997; over 2 nodes 1 - 0.5^8; one node
    none; top-1 over N nodes (N - 1) / N."""
    assert remote_nodes_per_token(4, 8) == pytest.approx(3 * (1 - 0.75 ** 8))
    assert remote_nodes_per_token(2, 8) == pytest.approx(1 - 0.5 ** 8)
    assert remote_nodes_per_token(1, 8) == 0.0
    assert remote_nodes_per_token(16, 1) == pytest.approx(15 / 16)


def test_across_nodes_the_nic_carries_one_copy_per_node():
    """4 nodes of 8 H100s, 8 x 400 Gb/s InfiniBand, top-8: a node sends 8 x 2.6997 / 8 of each GPU's bytes through
    its 400 GB/s of NICs at the prior's efficiency; NVLink carries 7/8 of them at 450 GB/s x 0.95, less. 128 MiB:
    the NIC bound."""
    v = view(nodes=4, gpus=8, intra_GBps=450.0, net_gbps=400.0, nics=8, arch="hopper")
    p = prior_params(v)
    size = 128 << 20
    est = deepep_estimate(v, size, 8, p, latency_s=20e-6)
    net_s = size * 8 * remote_nodes_per_token(4, 8) / 8 / (400e9 * p.net_efficiency)
    intra_s = size * 7 / 8 / (450e9 * DEEPEP_NVLINK_EFFICIENCY)
    assert net_s > intra_s
    assert (est.bottleneck, est.algo) == ("net", "deepep")
    assert est.time_s == pytest.approx(20e-6 + net_s)
    # NCCL's all-to-all sends each of the 8 copies to its rank: 3/4 of them off the node, through NCCL's channels
    assert DEFAULT_NCCL.predict(v, "alltoall", size).time_s > 1.5 * est.time_s


def test_inside_one_node_nvlink_carries_the_other_gpus_share():
    """EP 8 on one H100 server: 7/8 of the bytes over NVLink at 0.95 of 450 GB/s (DeepEP's 153-158 of ~160 GB/s)."""
    v = view(nodes=1, gpus=8, intra_GBps=450.0, arch="hopper")
    est = deepep_estimate(v, 64 << 20, 2, prior_params(v), latency_s=10e-6)
    assert est.bottleneck == "intra"
    assert est.bandwidth_s == pytest.approx((64 << 20) * 7 / 8 / (450e9 * 0.95))


@given(net_gbps=st.floats(25, 800), more=st.floats(1.0, 4.0), nodes=st.sampled_from([2, 4, 16]),
       top_k=st.integers(1, 8))
def test_more_network_bandwidth_is_never_slower(net_gbps: float, more: float, nodes: int, top_k: int):
    """Metamorphic: faster NICs never make a DeepEP dispatch slower."""
    slow, fast = view(nodes=nodes, net_gbps=net_gbps), view(nodes=nodes, net_gbps=net_gbps * more)
    p = prior_params(slow)
    assert deepep_estimate(fast, 1 << 24, top_k, p, 0.0).time_s <= deepep_estimate(slow, 1 << 24, top_k, p, 0.0).time_s


def test_ep_calls_name_deepep_with_the_same_bytes():
    """The dispatcher changes how the bytes move, not how many: op 'deepep' with top-k beside the same size."""
    model = transformer(MIXTRAL)
    nccl = ep_calls(model, 1, 4096, 1, 8, 2)
    deepep = ep_calls(model, 1, 4096, 1, 8, 2, dispatcher="deepep")
    assert [(c.size_bytes, c.count, c.group) for c in nccl] == [(c.size_bytes, c.count, c.group) for c in deepep]
    assert (nccl[0].op, deepep[0].op, deepep[0].top_k) == ("alltoall", "deepep", 2)


def _step(dispatcher: str, nodes: int, ep: int, model=MIXTRAL):  # type: ignore[no-untyped-def]
    training = TrainingSpec(model=model, seq_len=4096, micro_batch=1, global_batch=8 * nodes,
                            strategy=StrategySpec(kind="zero1"),
                            parallel=ParallelSpec(ep=ep, ep_dispatcher=dispatcher))  # type: ignore[arg-type]
    return predict_step(load_preset("dgx-h100", nodes=nodes), training, model)


@pytest.mark.parametrize(("nodes", "ep", "experts"), [(1, 8, 8), (2, 16, 16)])
def test_a_step_with_deepep_spends_less_on_expert_all_to_alls(nodes: int, ep: int, experts: int):
    """A Mixtral-shaped job, ep 8 on one DGX H100 (NVLink only) and ep 16 over two (16 experts): DeepEP's step spends
    less time in expert all-to-alls than NCCL's, its compute within 1%."""
    model = MIXTRAL.model_copy(update={"experts": experts})
    nccl, deepep = _step("alltoall", nodes, ep, model), _step("deepep", nodes, ep, model)
    # the same kernels; what overlaps them (and slows them: OVERLAP_SLOWDOWN) moves by the all-to-alls' change
    assert deepep.compute_s == pytest.approx(nccl.compute_s, rel=1e-2)
    assert deepep.comm_by_collective_s["ep_comm"] < nccl.comm_by_collective_s["ep_comm"]
    assert deepep.step_time_s < nccl.step_time_s


def test_deepep_needs_nvlink_inside_the_node():
    """DeepEP checks for NVLink peer access between every pair of a node's GPUs: on PCIe servers it is refused,
    naming the field and what to use instead."""
    training = TrainingSpec(model=MIXTRAL, seq_len=4096, micro_batch=1, global_batch=8,
                            strategy=StrategySpec(kind="zero1"), parallel=ParallelSpec(ep=8, ep_dispatcher="deepep"))
    with pytest.raises(ConfigError, match="ep_dispatcher deepep needs NVLink .* talk over PCIe: use alltoall"):
        predict_step(load_preset("pcie-l40s", nodes=1), training, MIXTRAL)


def test_a_degraded_nic_slows_deepep_wherever_it_is():
    """Metamorphic, for the one-view-per-group shortcut: ep 16 over two DGX H100s (16 experts) with one NIC at 0.25
    gives the same DeepEP step on s0 or on s1, slower than the healthy step (its dispatch crosses every node's NICs)."""
    model = MIXTRAL.model_copy(update={"experts": 16})

    def step(faults: list[tuple[str, float]]):  # type: ignore[no-untyped-def]
        training = TrainingSpec(model=model, seq_len=4096, micro_batch=1, global_batch=16,
                                strategy=StrategySpec(kind="zero1"),
                                parallel=ParallelSpec(ep=16, ep_dispatcher="deepep"))
        topology = load_preset("dgx-h100", nodes=2, link_faults=[{"device": d, "factor": f} for d, f in faults])
        return predict_step(topology, training, model)

    healthy, on_s0, on_s1 = step([]), step([("s0/nic3", 0.25)]), step([("s1/nic3", 0.25)])
    assert on_s1.step_time_s == pytest.approx(on_s0.step_time_s, rel=1e-9)
    assert on_s0.comm_by_collective_s["ep_comm"] > healthy.comm_by_collective_s["ep_comm"]
    assert on_s0.step_time_s > healthy.step_time_s
