"""Python: strings with any prefix (`r`, `f`, `u`, `b`, triple-quoted or not), f-string
fields, `#` comments, `name = ...` and `name: str = ...` assignments, `.strip()`."""

from __future__ import annotations

import re
import unicodedata

from promptloop.optimizer.core.regions.model import BadEscape, Syntax, hex_value

STRING_RE = re.compile(r"([rRbBuUfF]{0,2})(\"\"\"|'''|\"|')")
_BAD_PREFIXES = ("ub", "bu", "uf", "fu", "ur", "ru", "bf", "fb")
_OCTAL = re.compile(r"[0-7]{1,3}")


def string_start(src: str, i: int) -> tuple[str, str] | None:
    m = STRING_RE.match(src, i)
    if m is None:
        return None
    prefix = m.group(1)
    if len(set(prefix.lower())) != len(prefix) or prefix.lower() in _BAD_PREFIXES:
        return None
    return prefix, m.group(2)


def decl_head(v: str) -> str:
    return rf"^[ \t]*(?P<name>{v})[ \t]*(?::[^=\n]*)?"


def decode_escape(e: str, text: str, i: int) -> tuple[str, int] | None:
    """Python's own escapes: \\a, \\U, \\N{NAME}, octal, and unknown ones kept as written."""
    if e == "a":
        return "\a", i
    if e == "U":
        code = hex_value(text, i, 8, "\\U" + text[i:i + 8])
        if code > 0x10FFFF:
            raise BadEscape("\\U" + text[i:i + 8])
        return chr(code), i + 8
    if e == "N":
        close = text.find("}", i)
        if not text.startswith("{", i) or close < 0:
            raise BadEscape("\\N" + text[i:i + 10])
        try:
            return unicodedata.lookup(text[i + 1:close]), close + 1
        except KeyError:
            raise BadEscape(text[i - 2:close + 1]) from None
    if e in "01234567":
        m = _OCTAL.match(text, i - 1)
        assert m is not None
        return chr(int(m.group(0), 8)), m.end()
    if e not in "\\'\"nrtbfvxu\n\r":
        return "\\" + e, i  # Python keeps unknown escapes as written
    return None


SYNTAX = Syntax(
    string_start=string_start, decl_head=decl_head, line_comment="#", braced_unicode=False,
    decode_escape=decode_escape, trim_calls=(".strip()", ".lstrip()", ".rstrip()"),
    interp_hint=lambda fstring: ("write '{{' and '}}' for literal braces" if fstring
                                 else "write '\\${' for a literal '${'"),
)
