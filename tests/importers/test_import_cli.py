"""`clustersim import`: each tool's example config becomes a scenario that `predict` runs; bad input exits 2 with
one line and writes nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.cli.app import app, main

DATA = Path(__file__).parent / "data"
# kind, file, flags, and what predict must see: (tp, pp, sequence_parallel, strategy, micro_batch, recompute)
EXAMPLES = [
    ("torchtitan", "llama3_8b.toml", ["--nodes", "8"], (2, 1, True, "fsdp", 2, "op")),
    ("deepspeed", "ds_zero3.json", ["--model", "llama2-13b", "--nodes", "4"], (1, 1, False, "zero3", 2, "none")),
    ("megatron", "gpt3_175b.sh", ["--nodes", "128"], (8, 8, True, "zero1", 1, "selective")),
    ("nemo", "nemo_llama3_8b.txt", ["--nodes", "4"], (2, 1, True, "zero1", 1, "selective")),
]


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """The console script's entry point in this process: (exit code, stdout, stderr)."""

    def invoke(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["clustersim", *args])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


@pytest.mark.parametrize(("recompute", "expected"), [(None, ("full", 16)), ("none", ("none", None)),
                                                      ("full", ("full", None))])
def test_recompute_replaces_the_configs_recomputation_and_its_layer_count(tmp_path: Path, recompute: str | None,
                                                                          expected: tuple[str, int | None]):
    """A torchtitan config recomputing every 2nd of 32 blocks imports as full over 16 layers; --recompute
    replaces both (none: no count left to contradict it; full: every layer)."""
    config = tmp_path / "job.toml"
    config.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[activation_checkpoint]\nmode = "selective"\n'
                      'selective_ac_option = "2"\n')
    out = tmp_path / "scenario.yaml"
    flags = ["--recompute", recompute] if recompute else []
    imported = CliRunner().invoke(app, ["import", "torchtitan", str(config), "--topology", "dgx-h100", "--nodes", "1",
                                        *flags, "-o", str(out)])
    assert imported.exit_code == 0, imported.output
    predicted = CliRunner().invoke(app, ["predict", str(out), "--json"])
    assert predicted.exit_code == 0, predicted.output
    training = json.loads(predicted.stdout)["scenario"]["training"]
    assert (training["activation_checkpointing"], training["recompute_layers"]) == expected


@pytest.mark.parametrize(("kind", "name", "extra", "expected"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_examples_import_and_predict(tmp_path: Path, kind: str, name: str, extra: list[str],
                                     expected: tuple[int, int, bool, str, int, str]):
    """Each example imports into a scenario file, and `predict` runs on it with the imported layout: TP, PP,
    sequence parallelism, data-parallel strategy, micro-batch and recompute as the config has them."""
    out = tmp_path / "scenario.yaml"
    imported = CliRunner().invoke(app, ["import", kind, str(DATA / name), "--topology", "dgx-h100", *extra,
                                        "-o", str(out)])
    assert imported.exit_code == 0, imported.output
    predicted = CliRunner().invoke(app, ["predict", str(out), "--json"])
    assert predicted.exit_code == 0, predicted.output
    result = json.loads(predicted.stdout)
    assert result["step_time_s"] > 0
    training = result["scenario"]["training"]
    parallel = training["parallel"]
    assert (parallel["tp"], parallel["pp"], parallel["sequence_parallel"], training["strategy"]["kind"],
            training["micro_batch"], training["activation_checkpointing"]) == expected
    assert training["global_batch"] == yaml.safe_load(out.read_text())["training"]["global_batch"]


def test_prints_without_output_and_warns_once_for_unknown_keys(tmp_path: Path):
    """Without -o the scenario goes to stdout (comments first); unknown keys are one warning line on stderr."""
    config = tmp_path / "job.toml"
    config.write_text('[model]\nname = "llama3"\nflavor = "8B"\nmystery = 1\n[training]\nlocal_batch_size = 1\n'
                      "seq_len = 8192\nwarmup = 5\n")
    result = CliRunner().invoke(app, ["import", "torchtitan", str(config), "--nodes", "2"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Imported by `clustersim import torchtitan`")
    assert yaml.safe_load(result.stdout)["training"]["model"] == "llama3-8b"
    warnings = [line for line in result.stderr.splitlines() if "not read" in line]
    assert len(warnings) == 1 and "model.mystery, training.warmup" in warnings[0]


def test_existing_output_kept_unless_forced(tmp_path: Path, run):
    """An existing -o file is refused (exit 2, one line, unchanged); --force replaces it."""
    out = tmp_path / "s.yaml"
    out.write_text("old\n")
    args = ("import", "deepspeed", str(DATA / "ds_zero3.json"), "--model", "llama2-13b", "--nodes", "4", "-o", str(out))
    code, _, err = run(*args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--force" in err
    assert out.read_text() == "old\n"
    assert run(*args, "--force")[0] == 0 and "zero3" in out.read_text()


@pytest.mark.parametrize(("args", "needle"), [
    (("deepspeed", str(DATA / "ds_zero3.json"), "--nodes", "4"), "give --model"),
    (("deepspeed", str(DATA / "ds_zero3.json"), "--model", "llama2-13b", "--nodes", "3"), "train_batch_size 512"),
    (("megatron", str(DATA / "gpt3_175b.sh"), "--nodes", "2"), "does not divide the 16 GPUs"),
    (("caffe", str(DATA / "ds_zero3.json")), "unknown format 'caffe'"),
    (("torchtitan", str(DATA / "missing.toml")), "not found"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, run, args: tuple[str, ...], needle: str):
    """A bad config or layout: exit 2, one line on stderr naming the cause, no scenario file."""
    out = tmp_path / "s.yaml"
    code, _, err = run("import", *args, "-o", str(out))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not out.exists()


@pytest.mark.parametrize(("kind", "text", "needle"), [
    ("torchtitan", "a" + ".a" * 100_000 + " = 1\n", "a key of more than 100 dotted parts"),
    ("torchtitan", "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
    ("deepspeed", "[" * 5000 + "]" * 5000, "nested too deeply"),
    ("megatron", "--num-layers 2 " * 20_000, "larger than 256 KiB"),
])
def test_hostile_configs_are_refused_quickly(tmp_path: Path, run, kind: str, text: str, needle: str):
    """A key nested 100,000 deep (tomllib's cost grows with its square), deep inline tables or arrays, a config
    of hundreds of KB: exit 2, one line, before the readers' work grows."""
    config = tmp_path / "hostile.cfg"
    config.write_text(text)
    code, _, err = run("import", kind, str(config), "--model", "llama2-7b", "--nodes", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err
