"""YAML text in, data out, with one error style; and the YAML files shipped as package data.

Every layer that reads YAML (presets, scenarios, profiles, cases) goes through here, so a bad file
always gives the same one-line ConfigError naming the source.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

from simulator.core.errors import ConfigError


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML text; ConfigError naming `source` and the parser's complaint on one line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:  # the parser recurses per level of nesting
        raise ConfigError(f"{source}: nested too deeply to be a clustersim file") from None


@cache
def package_yaml_texts(package: str, folder: str) -> dict[str, str]:
    """{file stem: text} of the *.yaml files shipped in `package`/`folder`."""
    directory = resources.files(package).joinpath(folder)
    return {
        entry.name.removesuffix(".yaml"): entry.read_text(encoding="utf-8")
        for entry in directory.iterdir()
        if entry.name.endswith(".yaml")
    }
