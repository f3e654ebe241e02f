"""What an importer returns (ImportedJob), and the reader every importer takes its settings through (Settings).

Settings reads typed values out of a nested mapping (a TOML or JSON document, or an argument list read as
flag -> value) by dotted key, names the source and key in every ConfigError, remembers which keys it read, and
lists the rest as unknown: a key that is neither read nor named as known-but-irrelevant (a learning rate, a
logging folder) is reported in one warning, never refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.core.errors import ConfigError
from simulator.core.input_file import MAX_INT

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclass
class ImportedJob:
    """A training job read from another tool's config: `training` holds TrainingSpec fields without the model;
    `model` is a preset name, a ModelSpec's fields, or None when the config names no model. `notes` say how a
    setting was read (written into the scenario as comments); `warnings` are shown on stderr."""

    training: dict[str, Any]
    model: str | dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


class Settings:
    """Typed, dotted-key access to a config's values. With `text_values` (an argument list) every value is a
    string or True (a flag given alone) and is parsed here; otherwise values must already have their type.
    A value "auto" (HuggingFace Trainer's DeepSpeed configs) is taken as the default, with a warning, where
    `auto` is allowed."""

    def __init__(self, data: Mapping[str, Any], source: str, *, text_values: bool = False,
                 auto: bool = False) -> None:
        self.data, self.source, self.text_values, self.auto = data, source, text_values, auto
        self.read: set[str] = set()
        self.warnings: list[str] = []

    def _raw(self, key: str) -> Any:
        self.read.add(key)
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def has(self, key: str) -> bool:
        """Whether `key` is given (a flag given alone counts)."""
        return self._raw(key) is not None

    def _given(self, key: str, default: Any) -> tuple[bool, Any]:
        value = self._raw(key)
        if value is None:
            return False, default
        if self.auto and value == "auto":
            self.warnings.append(f"{key} 'auto' (filled in by the HuggingFace Trainer): read as not given")
            return False, default
        return True, value

    def error(self, key: str, expected: str, value: Any) -> ConfigError:
        """ConfigError naming the source, the key, what it holds and what would be valid."""
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:36]}..."
        return ConfigError(f"{self.source}: {key}: expected {expected}, got {shown}")

    def value(self, key: str) -> Any:
        """The value as given (None when absent), marked as read."""
        return self._raw(key)

    def integer(self, key: str, default: int, *, least: int = 1) -> int:
        """An integer >= `least` (a JSON number such as 5e8 that is a whole number counts)."""
        given, value = self._given(key, default)
        if not given:
            return int(value)
        if self.text_values and isinstance(value, str):
            try:
                value = int(value) if value.strip().lstrip("+-").isdigit() else float(value)
            except ValueError:
                raise self.error(key, f"an integer >= {least}", value) from None
        if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_INT:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_INT:
            raise self.error(key, f"an integer >= {least}", value)
        return value

    def boolean(self, key: str, default: bool = False) -> bool:
        """true or false (with text values: a flag given alone, or true/false, 1/0, yes/no, on/off)."""
        given, value = self._given(key, default)
        if not given:
            return bool(value)
        if self.text_values and isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        if not isinstance(value, bool):
            raise self.error(key, "true or false", value)
        return value

    def text(self, key: str, default: str, choices: Iterable[str] | None = None) -> str:
        """A string; with `choices`, one of them (compared without case, returned as the choice is spelt)."""
        given, value = self._given(key, default)
        if not given:
            return str(value)
        if not isinstance(value, str):
            raise self.error(key, "a string", value)
        if choices is not None:
            known = {choice.lower(): choice for choice in choices}
            if value.strip().lower() not in known:
                raise self.error(key, f"one of {', '.join(known.values())}", value)
            return known[value.strip().lower()]
        return value

    def unknown(self, known: Iterable[str] = ()) -> list[str]:
        """Keys given but neither read nor `known` (a key, or a section whose keys are all known: 'optimizer'),
        as dotted paths in the order given; a section read whole (`has`) covers its keys."""
        covered = {*self.read, *known}
        unknown = []
        for key in _leaf_keys(self.data, ""):
            parts = key.split(".")
            if not any(".".join(parts[:n]) in covered for n in range(1, len(parts) + 1)):
                unknown.append(key)
        return unknown


def _leaf_keys(node: Mapping[str, Any], prefix: str) -> list[str]:
    """Dotted paths of the values in a nested mapping that are not themselves non-empty mappings (walked without
    recursion, in the order given)."""
    keys: list[str] = []
    stack: list[tuple[str, Any]] = [(f"{prefix}{name}", value) for name, value in reversed(list(node.items()))]
    while stack:
        key, value = stack.pop()
        if isinstance(value, Mapping) and value:
            stack.extend((f"{key}.{name}", item) for name, item in reversed(list(value.items())))
        else:
            keys.append(key)
    return keys
