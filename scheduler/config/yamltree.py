"""Bounded, safe YAML parsing: text → a plain tree of dicts, lists and raw ``Scalar`` leaves.

Only PyYAML's ``SafeLoader`` is used (composition plus its safe scalar constructors); nothing
else can be instantiated. Every scalar keeps its source text next to its YAML-typed value, so
a field that YuniKorn declares as a string gets exactly the text that was written (``010``
stays ``"010"``, ``yes`` stays ``"yes"``), as Go's YAML decoder does.

Guards against hostile input (each violation is a ``ConfigError``, never a crash):

* the text is at most ``MAX_BYTES`` (1 MiB) of UTF-8;
* collections nest at most ``MAX_DEPTH`` levels (bounded recursion, also for cyclic aliases);
* anchors and aliases are allowed, but the *expanded* tree may hold at most ``MAX_NODES``
  nodes, so an alias bomb ("billion laughs") is rejected after bounded work;
* duplicate mapping keys, non-scalar keys, merge keys (``<<``), multiple documents and
  unknown tags are rejected;
* the document must be a mapping (an empty document yields ``None``);
* a scalar that looks like an int or a timestamp but cannot be built as one (a month 13,
  more digits than Python converts) stays a string, as in Go, instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scheduler.config.errors import ConfigError

MAX_BYTES = 1 << 20
MAX_DEPTH = 100
MAX_NODES = 100_000

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Scalar:
    """A YAML scalar: ``text`` as written, ``value`` as YAML types it (str/int/float/bool/None…)."""

    text: str
    value: object
    line: int

    def describe(self) -> str:
        """Short rendering for error messages: ``'abc'`` or ``null``."""
        return "null" if self.value is None else repr(self.text)


Tree = dict[str, "Tree"] | list["Tree"] | Scalar


class _TooDeep(Exception):
    pass


class _TooMany(Exception):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses to nest deeper than MAX_DEPTH, or to compose more than
    MAX_NODES nodes, while composing (so a 1 MiB list of tiny items stops early: measured
    9.8 s and ~150 MiB to compose all 262k nodes of one, in pure-Python PyYAML)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._composed = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self._depth += 1
        self._composed += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep
            if self._composed > MAX_NODES:
                raise _TooMany
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def decode_text(text: str | bytes) -> tuple[str, bytes]:
    """Return the text and its exact UTF-8 bytes; reject oversize or undecodable input."""
    try:
        if isinstance(text, bytes):
            raw, decoded = text, text.decode("utf-8")
        else:
            raw, decoded = text.encode("utf-8"), text
    except UnicodeError as exc:
        raise ConfigError([f"configuration is not valid UTF-8: {exc}"]) from None
    if len(raw) > MAX_BYTES:
        raise ConfigError([f"configuration is {len(raw)} bytes, more than the {MAX_BYTES} allowed"])
    return decoded, raw


def parse_tree(text: str) -> dict[str, Tree] | None:
    """Parse one YAML document into a tree; ``None`` for an empty document."""
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        tree = _Converter(loader).convert(node, 1)
    except _TooDeep:
        raise ConfigError([f"YAML nests deeper than {MAX_DEPTH} levels"]) from None
    except _TooMany:
        raise ConfigError([_too_many_nodes()]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"invalid YAML: {_one_line(str(exc))}"]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(tree, dict):
        kind = "a list" if isinstance(tree, list) else f"the scalar {tree.describe()}"
        raise ConfigError([f"the configuration must be a YAML mapping, found {kind}"])
    return tree


class _Converter:
    """Walks the composed node graph, expanding aliases under a node budget."""

    def __init__(self, loader: _BoundedLoader) -> None:
        self._loader = loader
        self._nodes = 0

    def convert(self, node: Node, depth: int) -> Tree:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise ConfigError([_too_many_nodes()])
        if depth > MAX_DEPTH:
            raise _TooDeep
        line = _line(node)
        if isinstance(node, ScalarNode):
            return self._scalar(node, line)
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ_TAG:
                raise ConfigError([f"line {line}: unsupported YAML tag {node.tag!r}"])
            return [self.convert(item, depth + 1) for item in node.value]
        if isinstance(node, MappingNode):
            if node.tag != _MAP_TAG:
                raise ConfigError([f"line {line}: unsupported YAML tag {node.tag!r}"])
            out: dict[str, Tree] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, ScalarNode):
                    raise ConfigError([f"line {_line(key_node)}: mapping keys must be scalars"])
                if key_node.tag == _MERGE_TAG:
                    raise ConfigError([f"line {_line(key_node)}: merge keys ('<<') are not supported"])
                key = self._scalar(key_node, _line(key_node)).text
                if key in out:
                    raise ConfigError([f"line {_line(key_node)}: duplicate key {key!r}"])
                out[key] = self.convert(value_node, depth + 1)
            return out
        raise ConfigError([f"line {line}: unsupported YAML node"])  # pragma: no cover

    def _scalar(self, node: ScalarNode, line: int) -> Scalar:
        try:
            value = self._loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise ConfigError([f"line {line}: {_one_line(str(exc))}"]) from None
        except (ValueError, OverflowError):
            # A plain scalar that looks like a YAML int or timestamp but is not one (2001-13-45,
            # an int of 5,000 digits): Go's decoder keeps such a scalar as a string, and so do we.
            value = str(node.value)
        return Scalar(text=str(node.value), value=value, line=line)


def _too_many_nodes() -> str:
    return f"YAML expands to more than {MAX_NODES} nodes (alias/anchor bomb?)"


def _line(node: Node) -> int:
    mark = node.start_mark
    return int(mark.line) + 1 if mark is not None else 0


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.splitlines() if part.strip())
