"""Plain-language names of a step's tasks, for the Chrome trace (simulator.report.trace) and the timeline's
hover text (simulator.report.figures): "all-gather, block 3 forward, micro-batch 0" for the task the
planner calls `m0.ag_fwd3`.

The planners name tasks by a small grammar (simulator.training.plan, simulator.training.pipeline,
simulator.training.tasks.add_pass): `m{micro-batch}.` then the work (`fwd3`, `ag_bwd3`, `rs_root`,
`reduce_scatter2` for bucket 2, ...); under pipeline parallelism `F{stage}.{chunk}.{micro-batch}` and
`B...` for the passes, `send{k}.{j}` / `back{k}.{j}` for the activations and gradients sent to the next
and previous (virtual) stage, `red...` for gradient reductions; suffixes `.tp{k}` (the pass's k-th
tensor-parallel, expert or all-to-all collective), `.cp{k}` (its context-parallel ring exchange), `.x`
(the routed experts' share), `.across` (HSDP's all-reduce across replicas). A name outside the grammar
keeps its task id.
"""

from __future__ import annotations

import re

from simulator.training.timeline import Span

OPERATIONS = {"all_gather": "all-gather", "reduce_scatter": "reduce-scatter", "all_reduce": "all-reduce"}
PASSES = {"fwd": "forward", "bwd": "backward", "rec": "recompute", "F": "forward", "B": "backward"}
PASS_COLLECTIVES = {"tp_comm": "tensor-parallel collective", "ep_comm": "expert all-to-all",
                    "cp_comm": "context-parallel all-to-all"}

MICRO = re.compile(r"m(?P<m>\d+)\.(?P<work>.+)")
BLOCK_PASS = re.compile(r"(?P<pass>fwd|bwd|rec)(?P<i>\d+)")
BLOCK_GATHER = re.compile(r"ag_(?P<pass>fwd|bwd)(?P<i>\d+)")
BLOCK_REDUCTION = re.compile(r"rs(?P<i>\d+)")
BUCKET = re.compile(r"(?P<op>all_reduce|reduce_scatter)(?P<b>\d+)")
STAGE_PASS = re.compile(r"(?P<pass>[FB])(?P<s>\d+)\.(?P<c>\d+)\.(?P<j>\d+)(?P<part>\.dense)?(?:\.l(?P<l>\d+))?")
SEND = re.compile(r"(?P<dir>send|back)(?P<k>\d+)\.(?P<j>\d+)")
NUMBERED = re.compile(r"(?P<what>optimizer|step_end|param_ag|red)(?P<n>\d+)")
STAGE_GATHER = re.compile(r"ag(?P<s>\d+)\.(?P<c>\d+)")
SUFFIX = re.compile(r"(?P<base>.+)\.(?P<kind>tp|cp)(?P<k>\d+)")


def _micro_work(work: str, m: str, label: str) -> str | None:
    """A micro-batch's task (the part after `m{m}.`), or None outside the grammar."""
    micro = f"micro-batch {m}"
    op = OPERATIONS.get(label, label.replace("_", "-"))
    fixed = {"emb_fwd": f"forward, embeddings, {micro}", "head_fwd": f"forward, output layer, {micro}",
             "head_bwd": f"backward, output layer, {micro}", "accumulate": f"gradient accumulation, {micro}",
             "ag_root": f"all-gather, embeddings and output layer, {micro}",
             "rs_root": f"{op}, embeddings and output layer, {micro}"}
    if work in fixed:
        return fixed[work]
    if match := BLOCK_PASS.fullmatch(work):
        return f"{PASSES[match['pass']]}, block {match['i']}, {micro}"
    if match := BLOCK_GATHER.fullmatch(work):
        return f"all-gather, block {match['i']} {PASSES[match['pass']]}, {micro}"
    if match := BLOCK_REDUCTION.fullmatch(work):
        return f"{op}, block {match['i']}, {micro}"
    if match := BUCKET.fullmatch(work):
        return f"{OPERATIONS[match['op']]}, bucket {match['b']}, {micro}"
    return None


def _stage_pass(match: re.Match[str], chunks: int) -> str:
    """A pipeline stage's forward or backward of one micro-batch: `F1.0.4` -> 'forward, stage 1, micro-batch 4'."""
    parts = [PASSES[match["pass"]], f"stage {match['s']}"]
    if chunks > 1:
        parts.append(f"chunk {match['c']}")
    parts.append(f"micro-batch {match['j']}")
    if match["part"]:
        parts.append("dense blocks")
    if match["l"] is not None:
        parts.append(f"block {match['l']} from the stage's last")
    return ", ".join(parts)


def _plain(name: str, label: str, pipeline: bool, chunks: int) -> str | None:
    """The title of `name` without its collective suffixes, or None outside the grammar."""
    op = OPERATIONS.get(label, label.replace("_", "-"))
    if name == "optimizer":
        return "optimizer step"
    if name == "step_end":
        return "end of step (parameters gathered)"
    if name == "tied":
        return "all-reduce, tied embedding gradients (first and last stage)"
    if match := MICRO.fullmatch(name):
        return _micro_work(match["work"], match["m"], label)
    if match := STAGE_PASS.fullmatch(name):
        return _stage_pass(match, chunks)
    if name.startswith("red.") and (match := STAGE_PASS.fullmatch(name[4:])):
        return f"{op} of gradients, " + _stage_pass(match, chunks).split(", ", 1)[1]
    if match := SEND.fullmatch(name):
        k, stage = int(match["k"]), "virtual stage" if chunks > 1 else "stage"
        step, what = (1, "activations") if match["dir"] == "send" else (-1, "gradients")
        return f"pipeline send, {what} of micro-batch {match['j']}, {stage} {k} to {k + step}"
    if match := STAGE_GATHER.fullmatch(name):
        chunk = f", chunk {match['c']}" if chunks > 1 else ""
        return f"all-gather, stage {match['s']} parameters{chunk}"
    if match := NUMBERED.fullmatch(name):
        n, what = match["n"], match["what"]
        if what == "param_ag":
            return f"all-gather, updated parameters, stage {n}" if pipeline else \
                f"all-gather, updated parameters, bucket {n}"
        return {"optimizer": f"optimizer step, stage {n}", "step_end": f"end of step, stage {n}",
                "red": f"{op} of gradients, stage {n}"}[what]
    return None


def span_title(name: str, label: str, chunks: int = 0) -> str:
    """The plain-language name of the task `name` with label `label` (see module docstring); `chunks`:
    model chunks per pipeline stage (0 without pipeline parallelism, above 1 interleaved)."""
    base, extra = name, []
    if base.endswith(".across"):  # HSDP: the shard's all-reduce across replicas (the span's label says so)
        base, extra = base[: -len(".across")], ["across replicas"]
    if base.endswith(".x"):
        base, extra = base[:-2], ["routed experts", *extra]
    collective = ""
    if match := SUFFIX.fullmatch(base):
        kind = "context-parallel ring exchange" if match["kind"] == "cp" else PASS_COLLECTIVES.get(label, label)
        collective, base = f"{kind} {match['k']}, ", match["base"]
    plain = _plain(base, label, chunks > 0, chunks)
    return name if plain is None else collective + ", ".join([plain, *extra])


def span_titles(spans: tuple[Span, ...]) -> dict[str, str]:
    """span_title of every span's task, with the pipeline's chunks per stage read off the spans."""
    stages = {span.stage for span in spans}
    chunks = 0
    if len(stages) > 1:
        chunks = 1 + max((int(m["c"]) for s in spans if (m := STAGE_PASS.fullmatch(s.name))), default=0)
    return {span.name: span_title(span.name, span.label, chunks) for span in spans}
