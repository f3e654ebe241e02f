"""The held-out training cases (benchmarks/data/heldout_training_cases.yaml): NVIDIA NeMo's published
pre-training tables, in the schema of ../shared/data/training/cases.yaml but kept out of it, so that
`validate-training` on them is an out-of-sample error. These tests check the file, not the model's error:
it parses, its rows are their own source and none is in the shared cases, the batch columns agree with each
other as the tables print them, and the rows the lowering expresses stay expressed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.validation.training_cases import map_case, parse_cases

REPO = Path(__file__).resolve().parents[2]
HELDOUT = REPO / "benchmarks" / "data" / "heldout_training_cases.yaml"
SHARED_CASES = REPO.parent / "shared" / "data" / "training" / "cases.yaml"
EXPRESSED_AT_LEAST = 33  # of 33


def _cases():
    return parse_cases(HELDOUT.read_text(), str(HELDOUT))


def test_file_parses_and_every_row_is_a_nemoperf_row_with_its_table():
    """33 rows, ids nemoperf-<release>-<system>-..., each naming its page (url) and table."""
    cases = _cases()
    assert len(cases) == 33
    assert {c.source for c in cases} == {"nemoperf"}
    for entry in yaml.safe_load(HELDOUT.read_text()):
        assert entry["source"]["url"].startswith(("https://github.com/NVIDIA/NeMo/", "https://docs.nvidia.com/"))
        assert entry["source"]["table"]
        assert entry["id"].split("-")[2] in ("h100", "b200", "gb200")


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="shared data not checked out next to the repo")
def test_no_row_is_in_the_shared_cases():
    """Held out: no id and no (model, GPUs, published tokens/s/GPU) of this file appears in the shared cases."""
    shared = parse_cases(SHARED_CASES.read_text(), str(SHARED_CASES))

    def key(c):
        return str(c.model.get("name")).lower(), c.cluster.get("num_gpus"), c.metrics.get("tokens_per_sec_per_GPU")

    assert not {c.id for c in _cases()} & {c.id for c in shared}
    assert not {key(c) for c in _cases()} & {key(c) for c in shared}


def test_batch_columns_agree_as_printed():
    """GBS = MBS x DP x GA on every row that states GA (the 25.x tables), DP = GPUs / (TP x PP x CP); the
    24.07 rows' GBS divides by MBS x DP."""
    for c in _cases():
        t = c.training
        dp = c.cluster["num_gpus"] // (t["tp"] * t["pp"] * t["cp"])
        assert dp == t["dp_derived"], c.id
        if t.get("grad_accum") is not None:
            assert t["global_batch"] == t["micro_batch"] * dp * t["grad_accum"], c.id
        assert t["global_batch"] % (t["micro_batch"] * dp) == 0, c.id


def test_every_row_is_expressed_with_its_stated_schedule():
    """Every row lowers onto the predictor's specs (every model the tables name has a preset; GB200 jobs that do
    not fill whole racks split evenly over them). Stated VP above 1 is the interleaved schedule."""
    mapped = [map_case(c) for c in _cases()]
    expressed = [m for m in mapped if m.skipped is None]
    assert len(expressed) >= EXPRESSED_AT_LEAST, [m.skipped for m in mapped if m.skipped]
    for m in expressed:
        vp = m.case.training.get("vp") or 1
        assert m.training is not None and m.training.parallel.virtual_stages == vp, m.case.id
        assert m.training.parallel.pipeline_schedule == ("interleaved" if vp > 1 else "1f1b"), m.case.id
