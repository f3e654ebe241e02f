"""YAML text in, data out, with one error style and bounded cost; and the YAML files shipped as package data.

Every layer that reads YAML (presets, scenarios, sweeps, manifests, profiles, cases) goes through
`load_yaml_text`, so a bad file always gives the same one-line ConfigError naming the source. The loader
holds every document to the limits of simulator.core.input_file: nesting deeper than MAX_DEPTH levels,
and more than MAX_VALUES values with each alias's values counted where it is used (the "billion laughs"
shape: a few hundred bytes of nested aliases that expand to billions of values), are refused while the
document is composed, before anything is expanded. A key given twice in one mapping is refused naming the
key and both lines (YAML 1.2 forbids it; PyYAML keeps the last silently). Numbers follow YAML 1.2: `1e308`
and `1.5e3` are floats (PyYAML's YAML 1.1 resolver reads them as strings); a literal beyond a float's range
(1e400) or a 64-bit integer's is refused naming its key and line instead of becoming infinity.
"""

from __future__ import annotations

import math
import re
from functools import cache
from importlib import resources
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver

from simulator.core.errors import ConfigError
from simulator.core.input_file import MAX_DEPTH, MAX_INT, MAX_VALUES

if yaml.__with_libyaml__:  # libyaml's parser: the events at C speed (the composer stays ours)
    from yaml._yaml import CParser as _Events
else:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Events(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)

_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Resolver(Resolver):
    """PyYAML's resolver with YAML 1.2's floats besides: an exponent without a dot or without a sign."""


_Resolver.add_implicit_resolver(
    _FLOAT_TAG, re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


class _Loader(Composer, _Events, SafeConstructor, _Resolver):
    """A safe loader that counts nesting and values as it composes, and checks keys and numbers as it
    constructs; ConfigError naming `source` and the line for each limit."""

    def __init__(self, text: str, source: str) -> None:
        _Events.__init__(self, text)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self.source, self.depth, self.values = source, 0, 0
        self.expanded: dict[int, int] = {}  # id(anchored node) -> its values, once composed

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, AliasEvent):
            node: Any = super().compose_node(parent, index)
            weight = self.expanded.get(id(node))
            if weight is None:
                raise ConfigError(f"{self.source}: line {line}: alias *{event.anchor} is used inside its own anchor")
            self._count(weight, line)
            return node
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ConfigError(f"{self.source}: nested too deeply (more than {MAX_DEPTH} levels, line {line})")
        before = self.values
        self._count(1, line)
        node = super().compose_node(parent, index)
        self.depth -= 1
        if getattr(event, "anchor", None) is not None:  # an alias to it while it is composed finds no weight
            self.expanded[id(node)] = self.values - before
        return node

    def _count(self, values: int, line: int) -> None:
        self.values += values
        if self.values > MAX_VALUES:
            raise ConfigError(f"{self.source}: more than {MAX_VALUES:,} values (line {line}; an alias counts "
                              "its anchor's values each time it is used)")

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise ConfigError(f"{self.source}: line {line}: key {key!r} given twice (first on line "
                                  f"{first_line[key]}); write it once")
            first_line[key] = line
            if isinstance(value_node, ScalarNode):
                self._check_number(value_node, f"{key}: ")
        return super().construct_mapping(node, deep=deep)

    def _check_number(self, node: ScalarNode, where: str = "") -> None:
        """ConfigError when `node` is an int beyond MAX_INT or a float literal beyond a float's range."""
        text = node.value.replace("_", "").lstrip("+-")
        if node.tag == _INT_TAG and text.isdigit() and (len(text) > 19 or int(text) > MAX_INT):
            shown = node.value if len(node.value) <= 24 else f"{node.value[:20]}... ({len(text)} digits)"
        elif node.tag == _FLOAT_TAG and _overflows(text):
            shown = node.value if len(node.value) <= 24 else f"{node.value[:20]}..."
        else:
            return
        raise ConfigError(f"{self.source}: line {node.start_mark.line + 1}: {where}{shown} is out of range "
                          "(integers up to 2**63-1, reals up to about 1.8e308)")

    def construct_yaml_int(self, node: ScalarNode) -> int:
        self._check_number(node)
        return int(super().construct_yaml_int(node))

    def construct_yaml_float(self, node: ScalarNode) -> float:
        self._check_number(node)
        return float(super().construct_yaml_float(node))


_Loader.add_constructor(_INT_TAG, _Loader.construct_yaml_int)  # type: ignore[type-var]
_Loader.add_constructor(_FLOAT_TAG, _Loader.construct_yaml_float)  # type: ignore[type-var]


def _overflows(text: str) -> bool:
    """Whether a float literal (sign and underscores gone) is finite as written but infinite as a float."""
    try:
        return math.isinf(float(text)) and "inf" not in text.lower()
    except ValueError:  # .nan, a sexagesimal 1:30.5, or an explicit !!float tag on text: PyYAML's own concern
        return False


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML text within the input limits; ConfigError naming `source` and what was wrong on one line."""
    loader = _Loader(text, source)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # PyYAML's constructors on an explicit tag
        # they cannot build (`!!int abc`, `!!timestamp x`, `!!set [1]`) raise these rather than a YAMLError
        raise ConfigError(f"{source}: not valid YAML: a value tagged with a type it is not ({exc})") from None
    except RecursionError:  # the depth limit stops nesting first; kept for a Python with a low recursion limit
        raise ConfigError(f"{source}: nested too deeply to be a clustersim file") from None
    finally:
        loader.dispose()


@cache
def package_yaml_texts(package: str, folder: str) -> dict[str, str]:
    """{file stem: text} of the *.yaml files shipped in `package`/`folder`."""
    directory = resources.files(package).joinpath(folder)
    return {
        entry.name.removesuffix(".yaml"): entry.read_text(encoding="utf-8")
        for entry in directory.iterdir()
        if entry.name.endswith(".yaml")
    }
