"""Plain-language names of the planners' tasks (simulator.report.names)."""

from __future__ import annotations

import pytest

from simulator.report.names import span_title, span_titles
from simulator.scenario import DEFAULT_SCENARIO, resolve_scenario
from simulator.training.predict import predict_step
from simulator.training.timeline import Span

CASES = [
    ("m0.ag_fwd3", "all_gather", 0, "all-gather, block 3 forward, micro-batch 0"),
    ("m1.ag_bwd2.x", "all_gather", 0, "all-gather, block 2 backward, micro-batch 1, routed experts"),
    ("m2.fwd5", "forward", 0, "forward, block 5, micro-batch 2"),
    ("m2.rec5", "recompute", 0, "recompute, block 5, micro-batch 2"),
    ("m0.head_bwd", "backward", 0, "backward, output layer, micro-batch 0"),
    ("m3.rs7", "reduce_scatter", 0, "reduce-scatter, block 7, micro-batch 3"),
    ("m3.rs7.across", "all_reduce", 0, "all-reduce, block 7, micro-batch 3, across replicas"),
    ("m3.reduce_scatter2", "reduce_scatter", 0, "reduce-scatter, bucket 2, micro-batch 3"),
    ("m3.all_reduce0.x", "all_reduce", 0, "all-reduce, bucket 0, micro-batch 3, routed experts"),
    ("m0.fwd3.tp1", "tp_comm", 0, "tensor-parallel collective 1, forward, block 3, micro-batch 0"),
    ("m0.fwd3.tp0", "ep_comm", 0, "expert all-to-all 0, forward, block 3, micro-batch 0"),
    ("m0.bwd3.cp2", "cp_comm", 0, "context-parallel ring exchange 2, backward, block 3, micro-batch 0"),
    ("optimizer", "optimizer", 0, "optimizer step"),
    ("param_ag4", "all_gather", 0, "all-gather, updated parameters, bucket 4"),
    ("param_ag1", "all_gather", 1, "all-gather, updated parameters, stage 1"),
    ("F1.0.4", "forward", 1, "forward, stage 1, micro-batch 4"),
    ("B0.1.6", "backward", 2, "backward, stage 0, chunk 1, micro-batch 6"),
    ("send0.4", "p2p", 1, "pipeline send, activations of micro-batch 4, stage 0 to 1"),
    ("back1.4", "p2p", 1, "pipeline send, gradients of micro-batch 4, stage 1 to 0"),
    ("red.B1.0.7.l0", "reduce_scatter", 1,
     "reduce-scatter of gradients, stage 1, micro-batch 7, block 0 from the stage's last"),
    ("red1.x", "all_reduce", 1, "all-reduce of gradients, stage 1, routed experts"),
    ("optimizer1", "optimizer", 1, "optimizer step, stage 1"),
]


@pytest.mark.parametrize(("name", "label", "chunks", "title"), CASES)
def test_task_titles(name, label, chunks, title):
    """Each kind of task id reads as written out by hand."""
    assert span_title(name, label, chunks) == title


def test_unknown_task_keeps_its_id():
    """A name outside the planners' grammar is shown as it is."""
    assert span_title("something.else", "forward") == "something.else"


def test_span_titles_reads_the_pipeline_off_the_spans():
    """Spans on two stages with chunk 1 present: interleaved, so the chunk is named; one stage: no pipeline."""
    spans = (Span("F0.1.0", "compute", "forward", 0, 1, stage=0), Span("param_ag1", "ag", "all_gather", 1, 2, stage=1))
    assert span_titles(spans) == {"F0.1.0": "forward, stage 0, chunk 1, micro-batch 0",
                                  "param_ag1": "all-gather, updated parameters, stage 1"}
    assert span_titles((Span("param_ag1", "ag", "all_gather", 1, 2),)) == {
        "param_ag1": "all-gather, updated parameters, bucket 1"}


def _prediction_spans(strategy: str, **parallel: object) -> tuple[Span, ...]:
    training = DEFAULT_SCENARIO.training
    training = training.model_copy(update={
        "strategy": training.strategy.model_copy(update={"kind": strategy}),
        "parallel": training.parallel.model_copy(update=parallel)})
    topology, resolved, model = resolve_scenario(DEFAULT_SCENARIO.model_copy(update={"training": training}))
    return predict_step(topology, resolved, model).spans


@pytest.mark.parametrize(("strategy", "parallel"), [
    ("hsdp", {}), ("fsdp", {"cp": 2}), ("zero1", {"tp": 2, "tp_comm_overlap": True}), ("ddp", {}),
    ("zero1", {"pp": 2}), ("ddp", {"pp": 2, "pipeline_schedule": "interleaved", "virtual_stages": 2})])
def test_every_planned_task_has_a_plain_name(strategy, parallel):
    """Every span of FSDP/HSDP with context parallelism, ZeRO-1 with overlapped tensor parallelism, DDP's
    buckets, and 1F1B and interleaved pipelines gets a plain name, not its id."""
    spans = _prediction_spans(strategy, **parallel)
    titles = span_titles(spans)
    assert [s.name for s in spans if titles[s.name] == s.name] == []
