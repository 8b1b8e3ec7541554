"""The Markdown documentation holds together in a fresh clone.

Every link and image in README.md, ARCHITECTURE.md, docs/**/*.md and examples/**/README.md
that is not a web address must name a file (or folder) of the repository: tracked by git when
the repository is a git checkout (an untracked file is not in a clone), never outside the
repository (no `../shared/...`), and an anchor (`file.md#section`, `#section`) must match a
heading of the target by GitHub's slug rules. README.md stays short: at most 160 lines.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 160

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); text may hold one level of brackets (badges)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*"
                   r"(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                   r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_REF = re.compile(r"""<(?:a|img)\s[^>]*?(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "examples").rglob("README.md"))
    return [f for f in files if f.is_file()]


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code removed."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
                continue
            if marker.startswith(fence):
                fence = None
                continue
        if fence is None:
            out.append((n, _INLINE_CODE.sub("", line)))
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link, image, reference definition and HTML href/src."""
    found: list[tuple[int, str]] = []
    for n, line in _prose_lines(path.read_text(encoding="utf-8")):
        for m in _LINK.finditer(line):
            found.append((n, m.group(1)))
        m = _REFERENCE.match(line)
        if m:
            found.append((n, m.group(1)))
        found += [(n, h) for h in _HTML_REF.findall(line)]
    return [(n, t[1:-1] if t.startswith("<") and t.endswith(">") else t) for n, t in found]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (code spans, emphasis and link targets
    dropped), lower case, punctuation but '-' and '_' removed, spaces as '-'."""
    parts = re.split(r"(`+[^`]*`+)", heading)
    for i, part in enumerate(parts):
        if part.startswith("`"):
            parts[i] = part.strip("`")  # a code span is its text, as written
            continue
        part = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", part)  # [text](url) -> text
        part = re.sub(r"<[^>]+>", "", part)  # inline HTML
        parts[i] = re.sub(r"(\*\*|__|\*|(?<!\w)_|_(?!\w))", "", part)
    text = "".join(parts).strip().lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in ("L", "N") or cat == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 ... for repeats."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in _prose_lines_keep_code(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        if slug in seen:
            seen[slug] += 1
            out.add(f"{slug}-{seen[slug]}")
        else:
            seen[slug] = 0
            out.add(slug)
    out |= set(re.findall(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""",
                          path.read_text(encoding="utf-8")))
    return frozenset(out)


def _prose_lines_keep_code(text: str) -> list[tuple[int, str]]:
    """Lines outside fenced code blocks, inline code kept (a heading's `code` is its text)."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
                continue
            if marker.startswith(fence):
                fence = None
                continue
        if fence is None:
            out.append((n, line))
    return out


@cache
def tracked() -> frozenset[str] | None:
    """The repository's tracked files (None when this is not a git checkout)."""
    try:
        got = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    files = frozenset(p for p in got.stdout.decode("utf-8", "replace").split("\0") if p)
    return files or None


def in_clone(target: Path) -> bool:
    """`target` (inside ROOT) is a file or a folder a fresh clone has."""
    rel = target.relative_to(ROOT).as_posix()
    files = tracked()
    if files is None:
        return target.exists()
    if rel in ("", "."):
        return True
    return rel in files or any(f.startswith(rel.rstrip("/") + "/") for f in files)


def problems(path: Path) -> list[str]:
    out: list[str] = []
    where = path.relative_to(ROOT).as_posix()
    for n, raw in links(path):
        target = raw.strip()
        if not target or _EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        if file_part:
            dest = (ROOT / file_part.lstrip("/")) if file_part.startswith("/") else (
                path.parent / file_part)
            dest = Path(*dest.parts)  # keep '..' for the check below
            resolved = dest.resolve()
            if resolved != ROOT and ROOT not in resolved.parents:
                out.append(f"{where}:{n}: {raw!r} points outside the repository")
                continue
            if not in_clone(resolved):
                out.append(f"{where}:{n}: {raw!r}: no such file in a clone of the repository")
                continue
        else:
            resolved = path
        if anchor:
            if resolved.is_dir() or resolved.suffix.lower() not in (".md", ".markdown"):
                continue  # line anchors of code files (#L10) are GitHub's
            if unquote(anchor).lower() not in anchors(resolved):
                out.append(f"{where}:{n}: {raw!r}: no heading with the anchor #{anchor} in "
                           f"{resolved.relative_to(ROOT).as_posix()}")
    return out


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves_in_a_clone(path: Path) -> None:
    assert problems(path) == []


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_points_at_the_shared_folder(path: Path) -> None:
    """../shared/ (the original harness's spec) is not part of a clone."""
    assert "../shared" not in path.read_text(encoding="utf-8")


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_docs_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in doc_files()}
    assert {"README.md", "ARCHITECTURE.md"} <= names
    assert any(n.startswith("docs/") for n in names)


@pytest.mark.parametrize(("heading", "slug"), [
    ("How `optimize` decides", "how-optimize-decides"),
    ("The external proposer's sandbox", "the-external-proposers-sandbox"),
    ("Where promptloop differs from the original, and how to turn it on",
     "where-promptloop-differs-from-the-original-and-how-to-turn-it-on"),
    ("The `[agents.<name>]` table", "the-agentsname-table"),
    ("Prompt targets: files, literals, markers", "prompt-targets-files-literals-markers"),
    ("snake_case and **bold**", "snake_case-and-bold"),
    ("A [link](x.md) here", "a-link-here"),
])
def test_github_slugs(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_the_checker_catches_bad_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = ROOT / "docs" / "__link_check_probe__.md"
    text = ("# Title\n\n[ok](../README.md) [self](#title) [web](https://example.com)\n"
            "[gone](missing.md) [out](../../shared/SPEC.md) "
            "[anchor](../README.md#no-such-heading)\n"
            "```\n[in code](nowhere.md)\n```\n`[inline](nowhere.md)`\n")
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: text if self == doc
                        else Path.read_bytes(self).decode(encoding or "utf-8"))
    found = problems(doc)
    assert len(found) == 3, found
    assert any("missing.md" in p for p in found)
    assert any("outside the repository" in p for p in found)
    assert any("#no-such-heading" in p for p in found)
