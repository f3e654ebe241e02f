"""A prediction's cost is bounded by the model, not by the input's magnitude: millions of micro-batches cost what
a few dozen do, a job that cannot run is refused before its cluster is built, and inputs that look unintended
(a batch in tokens, a sequence past the model's context) are warned about."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import pytest

import simulator.training.predict as predict_module
from simulator.core.errors import ConfigError
from simulator.training.job_warnings import TOKENS_PER_STEP_WARN, job_warnings
from simulator.training.predict import FULL_RUN_FIRSTS, predict_step
from topologies.presets import load_preset
from workloads.presets import list_models, load_model
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

UNIFORM = ModelSpec(name="uniform", layers=16, hidden=1024, heads=16, vocab=32000, max_seq_len=2048)


def pipeline_job(global_batch: int) -> TrainingSpec:
    return TrainingSpec(model="uniform", seq_len=2048, micro_batch=1, global_batch=global_batch,
                        strategy=StrategySpec(kind="zero1"), parallel=ParallelSpec(pp=8))


def test_millions_of_micro_batches_simulate_as_few_as_dozens(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 stages, 8 million micro-batches: no run simulates more than FULL_RUN_FIRSTS x (pp + 1) micro-batches,
    memory stays under 100 MB (the schedule of every micro-batch had taken 2 GB), and the step is 100 times
    the 80,000-micro-batch step to within 0.1% (the steady state is linear)."""
    simulated: list[int] = []
    original = predict_module.simulate_step

    def counting(*args: object, **kwargs: object) -> object:
        simulated.append(int(args[5]))  # type: ignore[call-overload]
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(predict_module, "simulate_step", counting)
    topology = load_preset("dgx-h100", nodes=1)
    small = predict_step(topology, pipeline_job(80_000), UNIFORM)
    tracemalloc.start()
    try:
        large = predict_step(topology, pipeline_job(8_000_000), UNIFORM)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert max(simulated) <= FULL_RUN_FIRSTS * (8 + 1)
    assert peak_bytes < 100e6
    assert large.step_time_s == pytest.approx(100 * small.step_time_s, rel=1e-3)
    assert large.memory.total_bytes == small.memory.total_bytes  # 1F1B holds at most pp micro-batches


def test_a_batch_that_does_not_divide_is_refused_before_the_cluster_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """32,768 nodes and a global batch that does not divide over their GPUs: refused without building the graph
    (which took 20 s and 2 GB before the refusal)."""
    def never(*_: object) -> None:
        raise AssertionError("the cluster graph was built")

    monkeypatch.setattr(predict_module, "build_representative", never)
    training = TrainingSpec(model="uniform", seq_len=2048, micro_batch=2, global_batch=1_000_001)
    with pytest.raises(ConfigError, match="not a multiple of micro_batch 2 x 262144"):
        predict_step(load_preset("dgx-h100", nodes=32768), training, UNIFORM)
    with pytest.raises(ConfigError, match="does not divide the 262144 GPUs"):
        predict_step(load_preset("dgx-h100", nodes=32768), TrainingSpec(
            model="uniform", seq_len=2048, global_batch=262144, parallel=ParallelSpec(tp=8, pp=3)), UNIFORM)


@pytest.mark.parametrize(("micro_batch", "global_batch", "needle"), [
    (1, 1000, "the nearest that divide are 992 and 1008 (if you wrote 1K: a bare K is 1,000; 1Ki is 1,024)"),
    (8, 1_000_000, "(if you wrote 1M: a bare M is 1,000,000; 1Mi is 1,048,576)"),
    (1, 1001, "the nearest that divide are 992 and 1008"),
    (1, 8, "the smallest is 16"),
])
def test_a_batch_that_does_not_divide_says_what_would(micro_batch: int, global_batch: int, needle: str) -> None:
    """16 data-parallel GPUs: the refusal names the nearest global batches that divide, and a whole number of
    thousands (what `1K` reads as, K being 1,000 for counts) is told its 1,024-based twin."""
    training = TrainingSpec(model="uniform", seq_len=2048, micro_batch=micro_batch, global_batch=global_batch)
    with pytest.raises(ConfigError) as caught:
        predict_step(load_preset("dgx-h100", nodes=2), training, UNIFORM)
    assert needle in str(caught.value)
    if global_batch in (1001, 8):
        assert "if you wrote" not in str(caught.value)


def test_a_batch_over_the_token_rule_is_warned_about() -> None:
    """Exactly TOKENS_PER_STEP_WARN tokens a step passes; one sequence more is warned about, naming the batch in
    sequences it would be as tokens."""
    at = TOKENS_PER_STEP_WARN // 2048
    assert job_warnings(pipeline_job(at), UNIFORM) == []
    [warning] = job_warnings(pipeline_job(at + 1), UNIFORM)
    assert "training.global_batch 131,073 sequences x 2,048 tokens" in warning and "a batch in tokens" in warning
    [warning] = job_warnings(pipeline_job(8_000_000), UNIFORM)
    assert "(3,906 sequences)" in warning


def test_a_sequence_past_the_models_context_is_warned_about() -> None:
    """seq_len above the model's max_seq_len warns, naming both; at the context, or unset, it does not."""
    def job(seq_len: int | None) -> TrainingSpec:
        return TrainingSpec(model="uniform", seq_len=seq_len, global_batch=8)

    assert job_warnings(job(2048), UNIFORM) == job_warnings(job(None), UNIFORM) == []
    [warning] = job_warnings(job(10_000_000), UNIFORM)
    assert "training.seq_len 10,000,000" in warning and "max_seq_len 2,048" in warning


def test_dimensions_off_the_tensor_core_alignment_are_warned_about() -> None:
    """BigScience's 200B prototype (hidden 14,400, 64 heads, TP 8): head width 225 is not a multiple of 8 and a
    rank's 1,800 not a multiple of 64, two warnings; hidden 13,824 (head width 216, 1,728 a rank) none, nor any
    model preset at the tensor-parallel degrees its heads allow."""
    def job(tp: int) -> TrainingSpec:
        return TrainingSpec(model="m", global_batch=8, parallel=ParallelSpec(tp=tp))

    prototype = ModelSpec(name="bloom-200b", layers=80, hidden=14400, heads=64, vocab=250880, max_seq_len=2048)
    head, rank = job_warnings(job(8), prototype)
    assert "head width 225" in head and "multiple of 8" in head
    assert "1800 a rank" in rank and "multiple of 64" in rank
    aligned = prototype.model_copy(update={"hidden": 13824})
    assert job_warnings(job(8), aligned) == []
    for name, _ in list_models():
        model = load_model(name)
        for tp in (1, 2, 4, 8):
            if model.heads % tp == 0:
                assert job_warnings(job(tp), model) == [], (name, tp)


def test_an_nvl72_job_its_racks_hold_unevenly_is_warned_about() -> None:
    """A GB200 job of 19 trays is priced as 19 one-tray NVLink domains (the model's domains are equal): warned,
    naming the topology; 20 trays (2 racks of 10) and a stated domain size are not."""
    job = TrainingSpec(model="uniform", global_batch=8)
    warnings = job_warnings(job, UNIFORM, load_preset("gb200-nvl72", nodes=19))
    assert len(warnings) == 1 and warnings[0].startswith("topology gb200-nvl72: 76 GPUs (19 trays of 4)")
    assert job_warnings(job, UNIFORM, load_preset("gb200-nvl72", nodes=20)) == []
    assert job_warnings(job, UNIFORM, load_preset("gb200-nvl72", nodes=20, nvlink_domain_gpus=40)) == []


def test_predict_of_a_batch_typed_in_tokens_answers_with_one_warning_line() -> None:
    """`predict --nodes 1 --pp 8 --strategy zero1 --micro-batch 1 --seq-len 2048 --global-batch 8000000`: an
    answer (exit 0, a step over a day) and one warning line on stderr pointing to a batch in tokens."""
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--nodes", "1", "--pp", "8",
                          "--strategy", "zero1", "--micro-batch", "1", "--seq-len", "2048", "--global-batch", "8000000",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("warning: training.global_batch 8,000,000")
    assert "a batch in tokens" in out.stderr
    assert '"step_time_s": ' in out.stdout
