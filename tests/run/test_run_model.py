"""The run model: the closed-form goodput, the SimPy process and the vectorised Monte Carlo agreeing run
for run, scaling with the node count, and Llama 3 405B on 2,048 DGX H100."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.run.montecarlo import simulate, simulate_runs
from simulator.run.params import run_params
from simulator.run.process import simulate_process
from simulator.run.spec import CheckpointSpec, RunSpec
from simulator.run.summary import RunPrediction
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

DAY = 86400.0
FIELDS = ("wall_s", "checkpoint_s", "lost_work_s", "restart_s", "spare_wait_s", "interruptions")


def goodput(p, runs=300):
    samples = simulate(p, runs, seed=1)
    return RunPrediction(p, samples, "synthetic", runs, 1)


def test_goodput_matches_the_first_order_closed_form(synthetic):
    """2,048 nodes, node MTBF 50,000 h, save 60 s every 3,600 s, restart 600 s: within 2 points of
    1 - save/tau - (restart + tau/2)/M (M = job MTBF = 50,000 h / 2,048)."""
    mtbf_s = 50_000 * 3600 / 2048
    closed = 1 - 60 / 3600 - (600 + 3600 / 2) / mtbf_s
    assert goodput(synthetic()).goodput_fraction == pytest.approx(closed, abs=0.02)


def test_no_failures_leaves_only_the_saves(synthetic):
    """Without failures the wall time is the training plus one save per interval but the last."""
    p = synthetic(rates_per_s={})
    saves = math.ceil(p.work_s / p.interval_s) - 1
    assert goodput(p, 3).samples.wall_s == pytest.approx(p.work_s + saves * p.save_block_s)


@pytest.mark.parametrize("changes", [
    {},
    {"save_block_s": 4.0, "persist_s": 300.0},  # async: a failure while writing falls back one more interval
    {"hot_spares": 1, "repair_s": 20 * 3600.0, "rates_per_s": {"node": 1 / 36000, "software": 1 / 72000}},
    {"hot_spares": 0},
])
def test_simpy_process_and_vectorised_model_agree_run_for_run(synthetic, changes):
    """The same seeds give the same runs, to rounding, in the SimPy process and the numpy model."""
    p = synthetic(work_s=3 * DAY, **changes)
    fast, simpy_runs = simulate_runs(p, 25, seed=7), simulate_process(p, 25, seed=7)
    for field in FIELDS:
        assert np.allclose(getattr(fast, field), getattr(simpy_runs, field), rtol=1e-12, atol=1e-6), field


@settings(max_examples=20, deadline=None, derandomize=True)
@given(work_h=st.floats(1, 200), interval_per_mtbf=st.floats(0.01, 2.0), save_s=st.floats(1, 59),
       restart_s=st.floats(0, 3000), mtbf_h=st.floats(0.5, 500), persist=st.booleans(), seed=st.integers(0, 99))
def test_wall_time_is_work_plus_where_the_time_went(synthetic, work_h, interval_per_mtbf, save_s, restart_s, mtbf_h,
                                                    persist, seed):
    """Every run's wall time is its training plus saves, lost work, restarts and waits; the SimPy process agrees.
    The checkpoint interval is drawn up to twice the MTBF (at most 20,000 s): far beyond it a run fails
    e^(interval / MTBF) times an interval, millions of failures the event-by-event process takes minutes over
    (the vectorised model does not; derandomized, so every run of the suite draws the same cases)."""
    interval_s = min(20_000.0, max(60.0, interval_per_mtbf * mtbf_h * 3600))
    p = synthetic(work_s=work_h * 3600, interval_s=interval_s, save_block_s=save_s, restart_s=restart_s,
                  persist_s=save_s if persist else 0.0, rates_per_s={"gpu": 1 / (mtbf_h * 3600)})
    s = simulate_runs(p, 5, seed)
    parts = s.checkpoint_s + s.lost_work_s + s.restart_s + s.spare_wait_s
    assert np.allclose(s.wall_s, p.work_s + parts)
    assert np.allclose(simulate_process(p, 5, seed).wall_s, s.wall_s)


def test_runs_depend_only_on_seed_and_index(synthetic):
    params = synthetic()
    """Run i is the same whether simulated alone, in a batch, or in another batching."""
    whole = simulate(params, 40, seed=3, batch=40)
    split = simulate(params, 40, seed=3, batch=7)
    assert np.array_equal(whole.wall_s, split.wall_s)


def _llama3_job(nodes: int) -> tuple:
    topology = load_preset("dgx-h100", nodes=nodes)
    training = TrainingSpec(model="llama3-405b", seq_len=8192, micro_batch=1, global_batch=2048,
                            strategy=StrategySpec(kind="zero1"),
                            parallel=ParallelSpec(tp=8, pp=16, sequence_parallel=True,
                                                  pipeline_split="embedding_and_loss"))
    return topology, training, load_model("llama3-405b")


def test_interruptions_a_day_scale_with_the_node_count(fixed_step):
    """2,048 nodes see 16x the interruptions a day of 128 nodes (+-10%; the larger job spends a little
    more of its day restarting, when nothing fails)."""
    per_day = {}
    for nodes in (128, 2048):
        topology, training, model = _llama3_job(nodes)
        run = RunSpec(train_tokens=2e12, failures="llama3", runs=200)
        step = fixed_step(11.5 * 2048 / nodes, 2048 * 8192, nodes * 8)
        p = run_params(run, topology, training, model, step)
        per_day[nodes] = RunPrediction(p, simulate(p, run.runs), "llama3", run.runs, 0).interruptions_per_day
    assert per_day[2048] / per_day[128] == pytest.approx(16, rel=0.10)


def test_llama3_405b_on_2048_dgx_h100(fixed_step):
    """Llama 3 405B, TP 8 PP 16 SP, 8,192 tokens, global batch 2,048, llama3 preset, optimal interval:
    6.5-9.5 interruptions a day and goodput 0.85-0.97 (the paper: 419 in 54 days, > 90% effective time)."""
    topology, training, model = _llama3_job(2048)
    run = RunSpec(train_tokens=15.6e12, failures="llama3", checkpoint=CheckpointSpec(interval_s="optimal"))
    p = run_params(run, topology, training, model, fixed_step(11.5, 2048 * 8192, 16384))
    outcome = RunPrediction(p, simulate(p, run.runs), "llama3", run.runs, 0)
    assert 6.5 <= outcome.interruptions_per_day <= 9.5
    assert 0.85 <= outcome.goodput_fraction <= 0.97
    assert p.job_mtbf_s == pytest.approx(1296 * 3600 / 419, rel=1e-9)  # the preset reproduces its own job
    assert p.interval_s == pytest.approx(math.sqrt(2 * p.save_block_s * p.job_mtbf_s), abs=p.step_s)
