"""Conventions every command shares: commands load when run (the listing comes from a table that must match
them), units on counts, sizes and speeds, one vocabulary of job flags, --json wherever a table is printed,
and tables that are not wrapped mid-word when standard output is not a terminal."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from simulator.cli import job_args
from simulator.cli.app import COMMANDS, app
from simulator.cli.lazy_group import load_group
from simulator.core.errors import ConfigError
from topologies.presets import list_presets, load_preset

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True,
                          cwd=ROOT)


def refused_in_one_line(out: subprocess.CompletedProcess[str], needle: str) -> bool:
    lines = out.stderr.strip().splitlines()
    return out.returncode == 2 and len(lines) == 1 and needle in lines[0]


def _params(command: str) -> dict[str, object]:
    """A command's options by flag name (each of its flags, aliases included)."""
    group = load_group(COMMANDS[command].module)
    click_command = group.get_command(typer.Context(group), command)
    return {flag: param for param in click_command.params for flag in param.opts}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_command_loads_and_its_summary_is_its_help(name):
    """The root listing's summary of each command is the start of that command's own help."""
    group = load_group(COMMANDS[name].module)
    command = group.get_command(typer.Context(group), name)
    assert command is not None, name
    first = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
    assert first.startswith(COMMANDS[name].summary.rstrip(".")), (name, first)


def test_every_registered_command_is_listed():
    """A command a module registers is in the table `clustersim --help` lists (no command is hidden by it)."""
    for module in {entry.module for entry in COMMANDS.values()}:
        group = load_group(module)
        assert set(group.list_commands(typer.Context(group))) <= set(COMMANDS), module


def test_root_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.output


def test_global_batch_tokens_divides_by_the_sequence_length():
    """4Mi tokens of 4,096-token sequences (Llama 2 7B's context) is a global batch of 1,024 sequences."""
    result = CliRunner().invoke(app, ["predict", "--model", "llama2-7b", "--nodes", "2", "--global-batch-tokens",
                                      "4Mi", "--json"])
    assert result.exit_code == 0, result.output
    step = json.loads(result.output)
    assert step["scenario"]["training"]["global_batch"] == 1024 and step["tokens_per_step"] == 4 * 2**20


def test_global_batch_takes_a_count_suffix():
    """--global-batch 1K is 1,000 sequences: accepted where it divides (125 x 8 data-parallel GPUs)."""
    result = CliRunner().invoke(app, ["predict", "--model", "llama2-7b", "--nodes", "1", "--micro-batch", "1",
                                      "--global-batch", "1K", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["scenario"]["training"]["global_batch"] == 1000


def test_predict_takes_precision():
    result = CliRunner().invoke(app, ["predict", "--precision", "fp16", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["scenario"]["training"]["precision"] == "fp16"


def test_predict_takes_an_fp8_recipe_and_names_it():
    """--fp8-recipe (NeMo's cs read as tensorwise) reaches the echoed scenario and slows an fp8 step; a bad one is
    refused naming the field and the choices (the entry point turns the ConfigError into exit code 2)."""
    flags = ["predict", "--model", "llama3-8b", "--topology", "dgx-h100", "--nodes", "1", "--precision", "fp8",
             "--json"]
    delayed = CliRunner().invoke(app, flags)
    current = CliRunner().invoke(app, [*flags, "--fp8-recipe", "cs"])
    assert delayed.exit_code == 0 and current.exit_code == 0, current.output
    a, b = json.loads(delayed.output), json.loads(current.output)
    assert (a["scenario"]["training"]["fp8_recipe"], b["scenario"]["training"]["fp8_recipe"]) == ("delayed",
                                                                                                "tensorwise")
    assert b["step_time_s"] > a["step_time_s"]
    bad = CliRunner().invoke(app, [*flags, "--fp8-recipe", "hybrid"])
    assert isinstance(bad.exception, ConfigError)
    assert "fp8_recipe" in str(bad.exception) and "tensorwise" in str(bad.exception)


def test_scale_runs_a_3d_job_from_flags():
    """scale takes predict's layout flags: TP 2 x PP 2 with full recomputation at 1 and 2 nodes."""
    result = CliRunner().invoke(app, ["scale", "--model", "llama2-7b", "--nodes", "1,2", "--tp", "2", "--pp", "2",
                                      "--global-batch", "64", "--recompute", "full", "--strategy", "zero1",
                                      "--precision", "bf16", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [r["n_gpus"] for r in rows] == [8, 16] and rows[0]["scaling_efficiency"] == 1.0


def test_predict_and_scale_share_every_job_flag():
    """Every job flag defined in job_args is on predict and on scale, with the same help text."""
    predict, scale = _params("predict"), _params("scale")
    for flag in ("--tp", "--pp", "--cp", "--ep", "--micro-batch", "--global-batch", "--global-batch-tokens",
                 "--recompute", "--seq-len", "--precision", "--fp8-recipe", "--strategy", "--sequence-parallel",
                 "--schedule",
                 "--virtual-stages", "--placement", "--model", "--topology", "--gpus-per-node"):
        assert flag in predict and flag in scale, flag
        if flag != "--global-batch":  # scale's global batch is the first node count's
            assert predict[flag].help == scale[flag].help, flag


def test_plan_takes_strategy_repeated_and_strategies():
    """plan --strategy is repeatable; --strategies is the same flag (and a comma list works in either)."""
    plan = _params("plan")
    assert plan["--strategy"] is plan["--strategies"] and plan["--strategy"].multiple
    shared = ("--model", "--topology", "--nodes", "--seq-len", "--precision", "--fp8-recipe", "--global-batch",
              "--global-batch-tokens")
    predict = _params("predict")
    for flag in shared:
        assert flag in plan and flag in predict, flag


@pytest.mark.parametrize("command", ["predict", "scale", "plan", "compare", "collective", "validate", "calibrate",
                                     "crossval", "validate-training", "presets"])
def test_every_command_that_prints_a_table_has_json(command):
    assert "--json" in _params(command)


def test_presets_json_lists_every_preset():
    result = CliRunner().invoke(app, ["presets", "--json"])
    assert result.exit_code == 0
    names = [p["name"] for p in json.loads(result.output)]
    assert names == [name for name, _ in list_presets()]


def test_piped_tables_keep_every_cell_on_one_line():
    """CliRunner's output is not a terminal: each preset's description and each network cell ("8x 400G ib")
    appears whole on one line, not wrapped at 80 columns ("InfiniBan / d")."""
    result = CliRunner().invoke(app, ["presets"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    for name, description in list_presets():
        assert any(name in line and description in line for line in lines), name


def test_piped_predict_table_keeps_its_rows_whole():
    result = CliRunner().invoke(app, ["predict"])
    assert result.exit_code == 0
    assert any("where the critical GPU's time went" in line for line in result.output.splitlines())
    assert any("compute (incl. recompute, optimizer)" in line and " s" in line for line in result.output.splitlines())


def test_bad_global_batch_raises_config_error_naming_the_flag():
    result = CliRunner().invoke(app, ["predict", "--global-batch", "4X"])
    assert isinstance(result.exception, ConfigError) and "--global-batch" in str(result.exception)


@pytest.mark.parametrize(("args", "needle"), [
    (("predict", "--global-batch", "4X"), "--global-batch: unknown suffix 'X'"),
    (("predict", "--model", "llama2-7b", "--global-batch-tokens", "5M"), "--global-batch-tokens 5M"),
    (("predict", "--model", "llama2-7b", "--global-batch-tokens", "4M"), "4Mi is 4,194,304 tokens, 1,024 sequences"),
    (("predict", "--global-batch", "64", "--global-batch-tokens", "4Mi"), "give one of them"),
    (("scale", "--global-batch", "1.5"), "--global-batch: not a whole number"),
    (("plan", "--model", "llama2-7b", "--topology", "dgx-a100", "--global-batch", "8Q"), "--global-batch"),
    (("predict", "--train-tokens", "15X"), "--train-tokens"),
    (("collective", "--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4",
      "--transport", "ib", "--nic-gbps", "400Q"), "--nic-gbps: unknown unit 'Q'"),
])
def test_bad_units_exit_2_in_one_line(args, needle):
    assert refused_in_one_line(run(*args), needle)


def test_bad_bucket_size_in_a_scenario_names_the_field(tmp_path):
    """bucket_bytes: 25XB in a scenario: exit 2, one line naming the file and the field and the valid forms."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: dgx-h100\nnodes: 1\ntraining:\n  model: llama2-7b\n  strategy:\n"
                        "    kind: ddp\n    bucket_bytes: 25XB\n")
    out = run("predict", str(scenario))
    assert refused_in_one_line(out, "bucket_bytes") and "25MiB" in out.stderr


def test_bucket_and_link_speed_with_units_in_a_scenario(tmp_path):
    """bucket_bytes: 25MB (25e6 bytes) and nic_gbps: 50GB/s (400 Gbit/s) are read as written."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology:\n  gpu: H100-SXM5-80GB\n  gpus_per_node: 8\n  nodes: 2\n"
                        "  intra_node: nvswitch-nvlink4\n  inter_node: {transport: ib, nics_per_node: 8, "
                        "nic_gbps: 50GB/s}\ntraining:\n  model: llama2-7b\n  global_batch: 64\n  strategy:\n"
                        "    kind: ddp\n    bucket_bytes: 25MB\n")
    result = CliRunner().invoke(app, ["predict", str(scenario), "--json"])
    assert result.exit_code == 0, result.output
    echoed = json.loads(result.output)["scenario"]
    assert echoed["training"]["strategy"]["bucket_bytes"] == 25_000_000
    assert echoed["topology"]["inter_node"]["nic_gbps"] == 400.0


def test_job_options_cover_every_training_override():
    """job_options maps every flag predict passes to a field _apply knows (none silently dropped)."""
    options = job_args.job_options({"ep_overlap": True, "schedule": "1f1b", "moe_imbalance": 1.2, "tp": 2})
    assert options["ep_comm_overlap"] is True and options["pipeline_schedule"] == "1f1b"
    assert options["load_imbalance"] == 1.2 and options["tp"] == 2


def test_topology_overrides_take_a_link_speed_with_units():
    """A preset's NIC speed overridden as a sweep axis writes it ('50GB/s', '200G'): read in Gbit/s."""
    assert load_preset("dgx-h100", nodes=2, inter_node={"nic_gbps": "50GB/s"}).inter_node.nic_gbps == 400.0
    assert load_preset("dgx-h100", nodes=2, inter_node={"nic_gbps": "200G"}).inter_node.nic_gbps == 200.0


def test_version_prints_the_package_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("clustersim ")
