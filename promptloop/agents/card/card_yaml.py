"""The card YAML writer: block style, one scalar per line, never folded (docs/compat.md).

PyYAML's emitter folds long plain and quoted scalars at its `width`, so a must-contain substring
that straddles the fold is "missing" from the card text. This writer never breaks a scalar:
strings stay plain when they read back as the same string (under YAML 1.1 and 1.2) and are
double-quoted, with escapes, when they need quoting. Non-ASCII text is written as is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

import yaml

_RESOLVER = yaml.resolver.Resolver()
"""YAML 1.1 implicit resolution, as PyYAML's loader applies it (int 007, 12:30, dates...)."""

_YAML12_NON_STRING = re.compile(
    r"""[-+]?[0-9]+
    |0o[0-7]+|0x[0-9a-fA-F]+
    |[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)
    |~|null|Null|NULL|true|True|TRUE|false|False|FALSE""",
    re.VERBOSE,
)
"""YAML 1.2 core-schema scalars that are not strings (1e3, 0o17, ...)."""

_YAML11_BOOL_LETTERS = frozenset({"y", "Y", "n", "N"})
"""YAML 1.1 booleans that PyYAML does not resolve but other 1.1 parsers do."""

_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\0": "\\0",
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    "\x1b": "\\e",
    "\x85": "\\N",
    "\u2028": "\\L",
    "\u2029": "\\P",
}
_SURROGATE = re.compile("[\ud800-\udfff]")
"""Lone surrogates (from a JSON `\\ud83c` half emoji) cannot be stored in UTF-8 or escaped."""
_MAX_IMPLICIT_KEY = 1000
"""YAML limits implicit keys to 1024 characters; longer keys use the explicit `? ` form."""


def _printable(char: str) -> bool:
    """A character YAML allows unescaped inside a one-line scalar (no tab, no line break)."""
    code = ord(char)
    return (
        0x20 <= code <= 0x7E
        or (0xA0 <= code <= 0xD7FF and code not in (0x2028, 0x2029))
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or 0x10000 <= code <= 0x10FFFF
    )


def needs_quotes(text: str) -> bool:
    """Whether `text` must be double-quoted to read back as the same string on one line."""
    if not text or text[0] in _INDICATORS or text[0] == " " or text[-1] == " ":
        return True
    if not all(_printable(c) for c in text):
        return True
    if ": " in text or " #" in text or text.endswith(":") or text.startswith("..."):
        return True
    if text in _YAML11_BOOL_LETTERS or _YAML12_NON_STRING.fullmatch(text):
        return True
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))
    return bool(tag != "tag:yaml.org,2002:str")


def double_quoted(text: str) -> str:
    """`text` as a one-line YAML double-quoted scalar."""
    out = []
    for char in text:
        escape = _ESCAPES.get(char)
        if escape is not None:
            out.append(escape)
        elif _printable(char):
            out.append(char)
        elif ord(char) <= 0xFF:
            out.append(f"\\x{ord(char):02X}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(f"\\U{ord(char):08X}")
    return '"' + "".join(out) + '"'


def scalar(value: Any) -> str:
    """One scalar (or empty collection) as YAML text on one line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        # YAML 1.1 floats need a dot: 1e+20 -> 1.0e+20
        return text if "." in text else text.replace("e", ".0e")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, str):
        value = _SURROGATE.sub("\ufffd", value)
        return double_quoted(value) if needs_quotes(value) else value
    if isinstance(value, Mapping) and not value:
        return "{}"
    if isinstance(value, Sequence) and not value:
        return "[]"
    raise TypeError(f"cannot write {type(value).__name__} to a card file")


def _is_block(value: Any) -> bool:
    return bool(value) and isinstance(value, Mapping | list | tuple)


def _mapping(data: Mapping[Any, Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key, value in data.items():
        if isinstance(key, Mapping | list | tuple):
            raise TypeError("card file keys must be scalars")
        key_text = scalar(key)
        if len(key_text) > _MAX_IMPLICIT_KEY:
            lines.append(f"{pad}? {key_text}")
            key_text = ""
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key_text}:")
            _mapping(value, indent + 2, lines)
        elif isinstance(value, list | tuple) and value:
            lines.append(f"{pad}{key_text}:")
            _sequence(value, indent, lines)
        else:
            lines.append(f"{pad}{key_text}: {scalar(value)}")


def _sequence(items: Sequence[Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for item in items:
        if not _is_block(item):
            lines.append(f"{pad}- {scalar(item)}")
            continue
        start = len(lines)
        if isinstance(item, Mapping):
            _mapping(item, indent + 2, lines)
        else:
            _sequence(item, indent + 2, lines)
        lines[start] = f"{pad}- {lines[start][indent + 2 :]}"


def dump_yaml(data: Mapping[Any, Any]) -> str:
    """A mapping as block-style YAML: one scalar per line, no folding, no line-width limit."""
    if not data:
        return "{}\n"
    lines: list[str] = []
    _mapping(data, 0, lines)
    return "\n".join(lines) + "\n"


__all__ = ["double_quoted", "dump_yaml", "needs_quotes", "scalar"]
