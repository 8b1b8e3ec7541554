"""JavaScript and TypeScript: template literals (also `String.raw`) and quoted strings after
`const`/`let`/`var` (`export`, `: string` annotations, `as const`, `satisfies T`), regex
literals skipped, `.trim()`."""

from __future__ import annotations

import re

from promptloop.optimizer.core.regions.model import BadEscape, Syntax

REGEX_BEFORE = set("(,=:[!&|?{};+-*%<>~^")
"""After one of these (or at the start) a '/' opens a regex literal, not a division."""
REGEX_WORDS = {"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void",
               "throw", "yield", "await", "instanceof"}
RAW_TAG = re.compile(r"String\.raw[ \t]*")
TS_SUFFIX = re.compile(r"(?:as[ \t]+const|satisfies[ \t]+\w+)[ \t]*")


def string_start(src: str, i: int) -> tuple[str, str] | None:
    c = src[i]
    return ("", c) if c in "'\"`" else None


def decl_head(v: str) -> str:
    return (r"^[ \t]*(?:export[ \t]+)?(?:(?:const|let|var|static|readonly|public|private"
            rf"|protected|declare)[ \t]+)*(?P<name>{v})[ \t]*(?:[?!]?[ \t]*:[^=\n]*)?")


def skip_regex(src: str, i: int) -> int:
    """End of a regex literal starting at `i` ('/'), or i + 1 when it is not one."""
    j, in_class, n = i + 1, False, len(src)
    while j < n and src[j] != "\n":
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            j += 1
            while j < n and (src[j].isalnum()):
                j += 1
            return j
        j += 1
    return i + 1


def decode_escape(e: str, text: str, i: int) -> tuple[str, int] | None:
    """`\\0` (not before a digit); a legacy octal escape is an error in templates and strict
    code."""
    if e == "0" and not text[i:i + 1].isdigit():
        return "\0", i
    if e in "0123456789":
        raise BadEscape("\\" + e)
    return None


SYNTAX = Syntax(
    string_start=string_start, decl_head=decl_head, regex_literals=True,
    decode_escape=decode_escape,
    interp_hint=lambda fstring: "write '\\${' for a literal '${'",
)
