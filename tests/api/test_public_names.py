"""The public API: `simulator` exports its names lazily, and importing it loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import simulator

HEAVY = ("plotly", "scipy", "networkx", "simpy", "typer", "rich", "pydantic", "numpy")


def test_the_documented_import_works():
    """`from simulator import Scenario, predict, scale, plan, compare, sweep` (the issue's bar)."""
    from simulator import Scenario, compare, plan, predict, scale, sweep

    assert all(callable(f) for f in (Scenario, predict, scale, plan, compare, sweep))


def test_every_name_of_all_resolves():
    """Each name of `__all__` is an attribute, and `dir()` lists exactly them."""
    for name in simulator.__all__:
        assert getattr(simulator, name) is not None
    assert sorted(dir(simulator)) == sorted(simulator.__all__)


def test_an_unknown_name_is_an_attribute_error():
    """A name outside the API raises AttributeError naming it (as a plain module would)."""
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = simulator.no_such_thing


def test_importing_simulator_loads_no_heavy_dependency():
    """`import simulator` alone imports none of the simulation's dependencies (they load on first use)."""
    code = f"import sys, simulator; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_predicting_does_not_load_plotly_until_a_figure_is_asked_for():
    """plotly is imported by `figure()`, not by predicting."""
    code = ("import sys, simulator as cs; p = cs.predict(cs.Scenario(model='llama2-7b', nodes=1, seq_len=1024)); "
            "a = 'plotly' in sys.modules; p.figure(); print(a, 'plotly' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
