"""`presets` and `topology show`, registered on a throwaway Typer app."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from simulator.cli.topology import register
from simulator.core.errors import ConfigError


@pytest.fixture
def app() -> typer.Typer:
    """A fresh app holding only this module's commands."""
    fresh = typer.Typer()
    register(fresh)
    return fresh


def test_presets_lists_every_preset(app):
    """`presets` prints a table naming the presets."""
    result = CliRunner().invoke(app, ["presets"], terminal_width=200)
    assert result.exit_code == 0
    assert "dgx-h100" in result.output and "8x 400G ib" in result.output


def test_topology_show_table(app):
    """`topology show dgx-h100 --nodes 4` prints the summary with the bisection bandwidth."""
    result = CliRunner().invoke(app, ["topology", "show", "dgx-h100", "--nodes", "4"], terminal_width=200)
    assert result.exit_code == 0
    assert "800 GB/s" in result.output and "32" in result.output


@pytest.mark.parametrize(("nodes", "domains"), [(18, "1 x 72 GPUs"), (32, "2 x 64 GPUs"), (36, "2 x 72 GPUs")])
def test_topology_show_names_the_nvlink_domains_of_nvl72_racks(app, nodes, domains):
    """NVL72 racks: the table says how many NVLink domains the GPUs form and how large (a job that does not fill
    whole racks splits evenly over the fewest); a server-sized domain (DGX) gets no such row."""
    result = CliRunner().invoke(app, ["topology", "show", "gb200-nvl72", "--nodes", str(nodes)], terminal_width=200)
    assert result.exit_code == 0 and f"NVLink domains │ {domains}" in " ".join(result.output.split())
    dgx = CliRunner().invoke(app, ["topology", "show", "dgx-h100", "--nodes", "2"], terminal_width=200)
    assert "NVLink domains" not in dgx.output


def test_topology_show_warns_when_the_racks_hold_the_trays_unevenly(app):
    """19 GB200 trays: two racks would hold them 10 + 9, which the equal-domain model cannot take; the table shows
    the split it prices (19 x 4 GPUs) and a warning on stderr names the even tray counts nearby."""
    result = CliRunner().invoke(app, ["topology", "show", "gb200-nvl72", "--nodes", "19"], terminal_width=200)
    assert result.exit_code == 0 and "NVLink domains │ 19 x 4 GPUs" in " ".join(result.output.split())
    assert "warning: 76 GPUs (19 trays of 4)" in result.stderr and "18 or 20 trays" in result.stderr
    even = CliRunner().invoke(app, ["topology", "show", "gb200-nvl72", "--nodes", "20"], terminal_width=200)
    assert "warning" not in even.stderr


def test_topology_show_json(app):
    """`--json` prints one object with the spec and the summary figures."""
    result = CliRunner().invoke(app, ["topology", "show", "abci-v", "--nodes", "2", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert (data["spec"]["name"], data["n_gpus"], data["bisection_bandwidth_Bps"]) == ("abci-v", 8, 25e9)


def test_unknown_topology_raises_config_error(app):
    """An unknown name surfaces as ConfigError (the main app maps it to exit code 2)."""
    result = CliRunner().invoke(app, ["topology", "show", "nope"])
    assert isinstance(result.exception, ConfigError)
