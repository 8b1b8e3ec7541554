"""Guards a proposed prompt patch must pass before any evaluation is spent on it.

Each refusal is a `GuardViolation` with a code and a message that names what was wrong, so the
ledger records why and the proposer can be told. `prepare_patch` is the one call the loop
needs: parse the model's diff, apply it to the target prompt, render the canonical diff and
run every guard. Structure comes first (which files, which git operations), then content (size,
removals, hidden characters, eval-set literals). Writes an external proposer makes outside the
diff are `promptloop.optimizer.propose.watch`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promptloop.optimizer.core.redact import redact
from promptloop.optimizer.propose.apply import LineStats, apply_diff, line_stats, render_unified
from promptloop.optimizer.propose.literals import EvalLiteral, LiteralIndex
from promptloop.optimizer.propose.patch import (
    GITLINK_MODE,
    SYMLINK_MODE,
    FilePatch,
    ParsedDiff,
    PatchError,
    normalize_path,
    parse_diff,
    same_path,
)
from promptloop.optimizer.propose.textmatch import hidden_characters

GuardCode = Literal[
    "other_file", "path_escape", "git_internal", "created", "deleted", "renamed", "mode_change",
    "symlink", "binary", "hidden_text", "too_large", "too_much_removed", "too_many_lines",
    "eval_literal", "no_change", "outside_write", "breaks_literal", "outside_region", "secret"]
DEFAULT_MAX_CHANGED_LINES = 40
DEFAULT_MAX_REMOVED_SHARE = 0.3
DEFAULT_MAX_ADDED_CHARS = 6000
"""Characters a patch may add: about 40 long lines; a giant prompt is refused, not run."""
MAX_DIFF_CHARS = 1_000_000
"""A diff text longer than this is refused before it is parsed."""
_AREAS = (("tasks/", "an eval task"), ("graders/", "grader code"), ("fixtures/", "a fixture"),
          ("optimizer/", "harness code"), ("agents/", "agent code"), ("tests/", "a test"),
          ("manuals/", "the manual"), ("prompts/judges/", "a judge rubric"))


@dataclass(frozen=True)
class GuardViolation:
    code: GuardCode
    message: str


def _describe_path(path: str) -> str:
    for prefix, what in _AREAS:
        if path.startswith(prefix):
            return f"{path} ({what})"
    if path.endswith((".py", ".toml", ".json", ".yaml", ".yml", ".sh")):
        return f"{path} (code or configuration)"
    return path


def _is_target(f: FilePatch, path: str, target_path: str) -> bool:
    """A section git wrote (`diff --git`) must name the target exactly; a model's plain diff
    may use the bare file name."""
    if f.git_paths:
        return normalize_path(path) == normalize_path(target_path)
    return same_path(path, target_path)


def _path_violation(f: FilePatch, path: str, target_path: str) -> GuardViolation | None:
    if _is_target(f, path, target_path):
        return None
    norm = normalize_path(path)
    parts = norm.split("/")
    verb = ("creates" if f.source is None else "deletes" if f.target is None else "changes")
    only = f"; only the prompt file {target_path} may be changed"
    if ".." in parts or norm.startswith("~"):
        return GuardViolation("path_escape", f"the diff {verb} {norm}, a path outside the "
                              f"repository{only}")
    if any(part.lower() == ".git" for part in parts):
        return GuardViolation("git_internal", f"the diff {verb} {norm}, inside git's own "
                              f"directory (hooks, config, refs){only}")
    return GuardViolation("other_file", f"the diff {verb} {_describe_path(norm)}{only}")


def _operation_violations(f: FilePatch, target_path: str) -> list[GuardViolation]:
    """Binary patches, renames and copies, mode changes, symlinks; creating or deleting the
    target instead of editing it."""
    out: list[GuardViolation] = []
    name = f.path or "(unnamed file)"
    if f.binary:
        out.append(GuardViolation("binary", f"the diff carries a binary change to {name}; "
                                  "only text edits to the prompt are allowed"))
    if f.operation:
        verb = "renames" if f.operation == "rename" else "copies"
        out.append(GuardViolation("renamed", f"the diff {verb} {f.source} to {f.target}; edit "
                                  f"{target_path} in place instead"))
    modes = {f.old_mode, f.new_mode}
    if SYMLINK_MODE in modes:
        out.append(GuardViolation("symlink", f"the diff makes {name} a symbolic link (or "
                                  "replaces one); the prompt must stay a regular file"))
    elif GITLINK_MODE in modes:
        out.append(GuardViolation("mode_change", f"the diff adds or removes a submodule at "
                                  f"{name}"))
    elif f.old_mode and f.new_mode and f.old_mode != f.new_mode:
        out.append(GuardViolation("mode_change", f"the diff changes the mode of {name} from "
                                  f"{f.old_mode} to {f.new_mode}; only its text may change"))
    if f.source is None and f.target is not None and _is_target(f, f.target, target_path):
        out.append(GuardViolation("created", f"the diff creates {target_path} instead of "
                                  "editing it"))
    if f.target is None and f.source is not None and _is_target(f, f.source, target_path):
        out.append(GuardViolation("deleted", f"the diff deletes {target_path} instead of "
                                  "editing it"))
    return out


def structure_violations(diff: ParsedDiff, target_path: str) -> list[GuardViolation]:
    """What the diff touches and how: every path but the target's, and every git operation
    other than editing text in place."""
    out: list[GuardViolation] = []
    for f in diff.files:
        for path in f.all_paths:
            v = _path_violation(f, path, target_path)
            if v is not None and v not in out:
                out.append(v)
        out.extend(v for v in _operation_violations(f, target_path) if v not in out)
    return out


def _literal_violations(stats: LineStats, original: str,
                        index: LiteralIndex) -> list[GuardViolation]:
    """Eval-set literals in the added lines that the original prompt did not already hold,
    also when split across consecutive added lines."""
    reported = {id(lit) for lit in index.find(original)}
    out: list[GuardViolation] = []

    def report(found: list[EvalLiteral], where: str, text: str) -> None:
        for lit in found:
            if id(lit) not in reported:
                reported.add(id(lit))
                out.append(GuardViolation(
                    "eval_literal", f"{where} the eval-set {lit.describe()}: "
                    f"{text.strip()[:160]!r}; state a general rule without the tasks' "
                    "literal strings"))

    for block in stats.added_blocks:
        for line in block:
            report(index.find(line), "an added line contains", line)
        if len(block) > 1:
            parts = [line.strip() for line in block]
            unhyphenated = "".join(p.removesuffix("-") for p in parts)
            for joined in (" ".join(parts), "".join(parts), unhyphenated):
                report(index.find(joined), "added lines split across lines contain", joined)
    return out


def _meaningful_lines(text: str) -> list[str]:
    """The lines of `text` without whitespace at their ends, blank lines dropped: two prompts
    with the same meaningful lines differ by nothing a model reads as an instruction."""
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def content_violations(
    original: str,
    new: str,
    *,
    target_path: str,
    protected_literals: LiteralIndex,
    max_changed_lines: int = DEFAULT_MAX_CHANGED_LINES,
    max_removed_share: float = DEFAULT_MAX_REMOVED_SHARE,
    max_added_chars: int = DEFAULT_MAX_ADDED_CHARS,
) -> list[GuardViolation]:
    """What the change `original` -> `new` does to the prompt's text."""
    if new == original:
        return [GuardViolation("no_change", f"the patch does not change {target_path}")]
    if _meaningful_lines(new) == _meaningful_lines(original):
        return [GuardViolation("no_change", f"the patch changes only whitespace at line ends "
                               f"or blank lines of {target_path}, which is no change")]
    out: list[GuardViolation] = []
    stats = line_stats(original, new)
    hidden = sorted({name for line in stats.added_lines for name in hidden_characters(line)})
    if hidden:
        out.append(GuardViolation("hidden_text", "added lines contain invisible or control "
                                  f"characters ({', '.join(hidden[:5])}); write plain text"))
    if any(redact(line) != line for line in stats.added_lines):
        out.append(GuardViolation("secret", "an added line holds a secret promptloop knows (an "
                                  "API key, token or password from the environment or .env): "
                                  "a prompt is committed, pushed and sent to models; refused"))
    added_chars = sum(len(line) + 1 for line in stats.added_lines)
    if added_chars > max_added_chars:
        out.append(GuardViolation("too_large", f"the patch adds {added_chars:,} characters (at "
                                  f"most {max_added_chars:,}); propose a short, general rule"))
    total = sum(1 for line in original.splitlines() if line.strip())
    removed = sum(1 for line in stats.removed_lines if line.strip())
    if total and removed / total > max_removed_share:
        out.append(GuardViolation(
            "too_much_removed", f"the patch removes or rewrites {removed} of the prompt's {total} "
            f"non-blank lines ({removed / total:.0%}); at most {max_removed_share:.0%} may go"))
    if stats.changed > max_changed_lines:
        out.append(GuardViolation(
            "too_many_lines", f"the patch changes {stats.changed} lines (at most "
            f"{max_changed_lines}); propose the smallest change that explains the failures"))
    out.extend(_literal_violations(stats, original, protected_literals))
    return out


def check_guards(
    diff: ParsedDiff,
    *,
    target_path: str,
    original: str,
    new: str,
    protected_literals: LiteralIndex,
    max_changed_lines: int = DEFAULT_MAX_CHANGED_LINES,
    max_removed_share: float = DEFAULT_MAX_REMOVED_SHARE,
    max_added_chars: int = DEFAULT_MAX_ADDED_CHARS,
) -> list[GuardViolation]:
    """Every guard the patch `original` -> `new` (from `diff`) fails; empty when it may run.
    A diff refused for its structure is not also called a no-op."""
    out = structure_violations(diff, target_path)
    content = content_violations(original, new, target_path=target_path,
                                 protected_literals=protected_literals,
                                 max_changed_lines=max_changed_lines,
                                 max_removed_share=max_removed_share,
                                 max_added_chars=max_added_chars)
    return out + [v for v in content if not (out and v.code == "no_change")]


@dataclass(frozen=True)
class PreparedPatch:
    """A proposal ready for the gate: the applied prompt, its canonical diff, its refusals."""

    parsed: ParsedDiff
    new_text: str
    diff: str
    """`render_unified(original, new_text, target_path)`: what the ledger and git store."""
    violations: tuple[GuardViolation, ...]

    @property
    def accepted(self) -> bool:
        return not self.violations


def prepare_patch(
    diff_text: str,
    *,
    target_path: str,
    original: str,
    protected_literals: LiteralIndex,
    max_changed_lines: int = DEFAULT_MAX_CHANGED_LINES,
    max_removed_share: float = DEFAULT_MAX_REMOVED_SHARE,
    max_added_chars: int = DEFAULT_MAX_ADDED_CHARS,
) -> PreparedPatch:
    """Parse, apply and guard a diff. A `PatchError` (malformed, does not apply) is raised so
    the caller can send it back to the model; a diff refused for its structure (other files,
    renames, binaries...) is not an apply error but a refusal."""
    if len(diff_text) > MAX_DIFF_CHARS:
        huge = GuardViolation("too_large", f"the diff is {len(diff_text):,} characters (at most "
                              f"{MAX_DIFF_CHARS:,}); propose a short, general rule")
        return PreparedPatch(ParsedDiff((), lenient=True), original, "", (huge,))
    parsed = parse_diff(diff_text)
    try:
        new = apply_diff(original, parsed, target_path)
    except PatchError:
        if not structure_violations(parsed, target_path):
            raise
        new = original  # refused for its structure anyway; do not retry
    violations = check_guards(parsed, target_path=target_path, original=original, new=new,
                              protected_literals=protected_literals,
                              max_changed_lines=max_changed_lines,
                              max_removed_share=max_removed_share,
                              max_added_chars=max_added_chars)
    return PreparedPatch(parsed, new, render_unified(original, new, target_path),
                         tuple(violations))
