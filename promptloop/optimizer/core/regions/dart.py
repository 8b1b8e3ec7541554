"""Dart: triple-quoted and one-line strings, raw (`r"..."`) or not, `$name` and `${...}`
interpolation, declarations with `const`, `final`, `static`, `late` and a type."""

from __future__ import annotations

import re

from promptloop.optimizer.core.regions.model import Syntax

STRING_RE = re.compile(r"(r?)(\"\"\"|'''|\"|')")
INTERP_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BARE_DOLLAR = "a '$' not followed by a name or '{' is an error in a Dart string; write '\\$'"


def string_start(src: str, i: int) -> tuple[str, str] | None:
    m = STRING_RE.match(src, i)
    return None if m is None else (m.group(1), m.group(2))


def decl_head(v: str) -> str:
    return (r"^[ \t]*(?:(?:static|late|external|const|final|var)[ \t]+)*"
            rf"(?:[A-Za-z_]\w*(?:<[^=\n]*>)?\??[ \t]+)?(?P<name>{v})[ \t]*")


SYNTAX = Syntax(
    string_start=string_start, decl_head=decl_head, nested_block_comments=True,
    raw_escapes=False, dollar_interpolation=True, backslash_newline_breaks_line_string=True,
    strips_blank_first_line=True, normalizes_crlf=False, line_continuation=False,
    interp_hint=lambda fstring: "write '\\$' for a literal dollar sign",
)
