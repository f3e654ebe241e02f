"""Nested mappings, as YAML files and overrides hold them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merged(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `update` applied, nested mappings merged key by key."""
    out = dict(base)
    for key, value in update.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out
