"""Golden predictions: training steps and collectives over healthy and faulty clusters (degraded and failed
NICs, GPUs, NVSwitches, leaves and spines, by device and by role; stragglers on a GPU, a server and a rank),
oversubscribed, rail-optimised and multi-leaf fabrics, NVL72 domains and PCIe servers. Each case's `--json`
output must equal the recorded one exactly: how the cluster is represented to price a job (one server per
class, see topologies.build.build_representative) must not move a number.

Regenerate deliberately, after a change meant to move predictions: python tests/training/test_identical_predictions.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simulator.cli.app import app

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "identical_predictions.json"

FSDP_7B = ("predict", "--model", "llama2-7b", "--strategy", "fsdp", "--micro-batch", "2", "--seq-len", "2048")
H100 = ("--topology", "dgx-h100")


def _fsdp(nodes: int, *extra: str) -> tuple[str, ...]:
    """Llama-2-7B FSDP, micro-batch 2 x 8 accumulation steps, on `nodes` DGX H100 servers."""
    return (*FSDP_7B, *H100, "--nodes", str(nodes), "--global-batch", str(2 * 8 * 8 * nodes), *extra)


def _file(name: str) -> str:
    return str(DATA / f"{name}.yaml")


CASES: dict[str, tuple[str, ...]] = {
    "fsdp-8": _fsdp(8),
    "fsdp-64": _fsdp(64),
    "fsdp-64-nic-degraded": _fsdp(64, "--link-fault", "s3/nic2=0.5"),
    "fsdp-64-nic-degraded-last": _fsdp(64, "--link-fault", "s63/nic2=0.5"),
    "fsdp-64-two-nics": _fsdp(64, "--link-fault", "s0/nic3=0.1", "--link-fault", "s40/nic3=0.1"),
    "fsdp-64-rail-role": _fsdp(64, "--link-fault", "nic3=0.5"),
    "fsdp-64-leaf": _fsdp(64, "--link-fault", "leaf9=0.25"),
    "fsdp-64-spine": _fsdp(64, "--link-fault", "spine0=0.5"),
    "fsdp-64-gpu": _fsdp(64, "--link-fault", "s5/gpu1=0.5"),
    "fsdp-64-nvswitch": _fsdp(64, "--link-fault", "s7/nvswitch=0.5"),
    "fsdp-64-pcie": _fsdp(64, "--link-fault", "s9/pcie1=0.5"),
    "fsdp-64-nic-failed": _fsdp(64, "--link-fault", "s3/nic2=0"),
    "fsdp-64-leaf-failed": _fsdp(64, "--link-fault", "leaf1=0"),
    "fsdp-64-mixed": _fsdp(64, "--link-fault", "s3/nic2=0.5", "--link-fault", "leaf12=0.5",
                           "--link-fault", "s50/gpu0=0.75"),
    "fsdp-8-straggler-gpu": _fsdp(8, "--straggler", "s3/gpu2=1.2"),
    "fsdp-8-straggler-server": _fsdp(8, "--straggler", "s3=1.1"),
    "fsdp-8-straggler-rank": _fsdp(8, "--straggler", "17=1.15"),
    "fsdp-8-straggler-and-fault": _fsdp(8, "--straggler", "s1/gpu0=1.3", "--link-fault", "s6/nic0=0.5"),
    "hsdp-16": (*FSDP_7B[:3], "--strategy", "hsdp", *FSDP_7B[5:], *H100, "--nodes", "16", "--global-batch", "2048"),
    "pipeline-8-straggler": ("predict", "--model", "llama2-13b", *H100, "--nodes", "8", "--tp", "8", "--pp", "4",
                             "--strategy", "zero1", "--micro-batch", "1", "--global-batch", "64",
                             "--straggler", "s5/gpu3=1.2", "--link-fault", "s2/nic1=0.5"),
    "3d-spanning-leaves": ("predict", "--model", "llama2-13b", "--topology", _file("rails-small-units"),
                           "--tp", "8", "--pp", "2", "--placement", "tp-dp-pp", "--strategy", "zero1",
                           "--micro-batch", "1", "--global-batch", "64", "--link-fault", "leaf5=0.5"),
    "leaf-spine-oversubscribed": ("predict", "--model", "llama2-7b", "--topology", _file("leaf-spine-oversubscribed"),
                                  "--strategy", "fsdp", "--micro-batch", "2", "--global-batch", "1024"),
    "leaf-spine-faults": ("predict", "--model", "llama2-7b", "--topology", _file("leaf-spine-oversubscribed"),
                          "--strategy", "fsdp", "--micro-batch", "2", "--global-batch", "1024",
                          "--link-fault", "leaf1=0.5", "--link-fault", "s13/nic1=0.5", "--link-fault", "spine3=0.5"),
    "rails-roce-faults": ("predict", "--model", "llama2-7b", "--topology", _file("rails-small-units"),
                          "--strategy", "fsdp", "--micro-batch", "1", "--global-batch", "512",
                          "--link-fault", "s6/nic4=0.2"),
    "single-switch": ("predict", "--model", "llama2-7b", "--topology", _file("single-switch"), "--strategy", "zero2",
                      "--micro-batch", "1", "--global-batch", "64", "--link-fault", "s2/nic1=0.5"),
    "nvl72": ("predict", "--model", "llama3-70b", "--topology", "gb200-nvl72", "--nodes", "36", "--tp", "8",
              "--strategy", "fsdp", "--micro-batch", "1", "--global-batch", "288",
              "--link-fault", "nvl1/nvswitch=0.5", "--link-fault", "s3/gpu1=0.5"),
    "aws-p5": ("predict", "--model", "llama2-7b", "--topology", "aws-p5", "--nodes", "4", "--strategy", "fsdp",
               "--micro-batch", "1", "--global-batch", "64", "--link-fault", "s1/nic5=0.5"),
    "pcie-l40s": ("predict", "--model", "llama2-7b", "--topology", "pcie-l40s", "--nodes", "2", "--strategy", "fsdp",
                  "--micro-batch", "1", "--global-batch", "32", "--link-fault", "s1/cpu1=0.5"),
    "dgx1-mesh": ("predict", "--model", "gpt2-xl", "--topology", "dgx-1-v100", "--nodes", "4", "--strategy", "ddp",
                  "--micro-batch", "1", "--global-batch", "64", "--link-fault", "s0/gpu2=0.5"),
    "experts": ("predict", "--model", "mixtral-8x7b", *H100, "--nodes", "8", "--ep", "8", "--strategy", "zero1",
                "--seq-len", "4096", "--micro-batch", "1", "--global-batch", "256", "--link-fault", "s4/nic0=0.5"),
    "context-parallel": ("predict", "--model", "llama3-8b", *H100, "--nodes", "4", "--cp", "8", "--seq-len", "131072",
                         "--strategy", "fsdp", "--recompute", "full", "--global-batch", "8"),
    "collective-faulty": ("collective", *H100, "--nodes", "16", "--op", "all_reduce", "-b", "8", "-e", "1G", "-f",
                          "8", "--link-fault", "s3/nic2=0.5", "--json"),
    "collective-engine": ("collective", "--topology", _file("leaf-spine-oversubscribed"), "--op", "all_gather",
                          "-b", "1M", "-e", "256M", "-f", "16", "--engine", "--link-fault", "leaf2=0.5", "--json"),
    "scale": ("scale", "--model", "llama2-7b", *H100, "--nodes", "1,4,32,64", "--strategy", "fsdp",
              "--micro-batch", "2", "--grad-accum", "8", "--json"),
}


def run_case(args: tuple[str, ...]) -> Any:
    """The JSON a case prints (predict gets --json added)."""
    argv = [*args, *(["--json"] if args[0] == "predict" else [])]
    result = CliRunner().invoke(app, argv, terminal_width=200)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", sorted(CASES))
def test_prediction_is_the_recorded_one(name: str) -> None:
    """Each case prints exactly the recorded JSON (every number identical)."""
    recorded = json.loads(GOLDEN.read_text())
    assert run_case(CASES[name]) == recorded[name]


if __name__ == "__main__":
    out = {name: run_case(args) for name, args in sorted(CASES.items())}
    GOLDEN.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    sys.exit(0)
