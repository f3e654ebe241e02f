"""JSON text in, data out, held to the same limits as YAML (simulator.core.input_file).

The JSON inputs (a HuggingFace config.json, an nccl-tests -J log) go through `load_json_text`: nesting
deeper than MAX_DEPTH levels, a key given twice in one object (RFC 8259 leaves it to the reader; Python's
json keeps the last silently), and a number beyond a float's range (1e400, which Python reads as
infinity) or a 64-bit integer's are refused with one line naming the source. JSON's own syntax errors
stay json.JSONDecodeError, for the caller to word in its own terms (a log line, a config file).
"""

from __future__ import annotations

import json
import math
from typing import Any

from simulator.core.errors import ConfigError
from simulator.core.input_file import MAX_DEPTH, MAX_INT


def load_json_text(text: str, source: str) -> Any:
    """Parse JSON text within the input limits; ConfigError naming `source` on one line, JSONDecodeError for
    text that is not JSON."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in items:
            if key in mapping:
                raise ConfigError(f"{source}: key {key!r} given twice in one object; write it once")
            mapping[key] = value
        return mapping

    def real(literal: str) -> float:
        value = float(literal)
        if math.isinf(value):
            raise ConfigError(f"{source}: {_shown(literal)} is out of range (reals up to about 1.8e308)")
        return value

    def integer(literal: str) -> int:
        if len(literal.lstrip("-")) > 19 or abs(int(literal)) > MAX_INT:  # also spares int() its 4,300-digit limit
            raise ConfigError(f"{source}: {_shown(literal)} is out of range (integers up to 2**63-1)")
        return int(literal)

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_float=real, parse_int=integer)
    except RecursionError:  # the decoder recurses per level; the limit below is the one users meet first
        raise ConfigError(f"{source}: nested too deeply (more than {MAX_DEPTH} levels)") from None
    if _depth(data) > MAX_DEPTH:
        raise ConfigError(f"{source}: nested too deeply (more than {MAX_DEPTH} levels)")
    return data


def _shown(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:20]}... ({len(literal)} characters)"


def _depth(data: Any) -> int:
    """Levels of lists and objects in decoded JSON (a scalar: 0), walked without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest
