"""Guards a proposed prompt patch must pass before any evaluation is spent on it.

Each refusal is a `GuardViolation` with a code and a message that names what was wrong, so the
ledger records why and the proposer can be told. `prepare_patch` is the one call the loop
needs: parse the model's diff, apply it to the target prompt, render the canonical diff and
run every guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from optimizer.propose.literals import LiteralIndex
from optimizer.propose.patch import (
    ParsedDiff,
    PatchError,
    apply_diff,
    line_stats,
    normalize_path,
    parse_diff,
    render_unified,
    same_path,
)

GuardCode = Literal["other_file", "too_much_removed", "too_many_lines", "eval_literal",
                    "no_change"]
DEFAULT_MAX_CHANGED_LINES = 40
DEFAULT_MAX_REMOVED_SHARE = 0.3
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


def check_guards(
    diff: ParsedDiff,
    *,
    target_path: str,
    original: str,
    new: str,
    protected_literals: LiteralIndex,
    max_changed_lines: int = DEFAULT_MAX_CHANGED_LINES,
    max_removed_share: float = DEFAULT_MAX_REMOVED_SHARE,
) -> list[GuardViolation]:
    """Every guard the patch `original` -> `new` (from `diff`) fails; empty when it may run."""
    out: list[GuardViolation] = []
    for path in diff.paths:
        if not same_path(path, target_path):
            out.append(GuardViolation(
                "other_file", f"the diff touches {_describe_path(normalize_path(path))}; only "
                f"the prompt file {target_path} may be changed"))
    for f in diff.files:
        if same_path(f.path, target_path) and (f.source is None or f.target is None):
            verb = "creates" if f.source is None else "deletes"
            out.append(GuardViolation("other_file", f"the diff {verb} {target_path} instead of "
                                      "editing it"))
    stats = line_stats(original, new)
    if new == original:
        out.append(GuardViolation("no_change", f"the patch does not change {target_path}"))
        return out
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
    already = {id(lit) for lit in protected_literals.find(original)}
    reported: set[int] = set()
    for line in stats.added_lines:
        for lit in protected_literals.find(line):
            if id(lit) in already or id(lit) in reported:
                continue
            reported.add(id(lit))
            out.append(GuardViolation(
                "eval_literal", f"an added line contains the eval-set {lit.describe()}: "
                f"{line.strip()[:160]!r}; state a general rule without the tasks' literal "
                "strings"))
    return out


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
) -> PreparedPatch:
    """Parse, apply and guard a diff. A `PatchError` (malformed, does not apply) is raised so
    the caller can send it back to the model; a diff that only touches other files is not an
    apply error but an `other_file` refusal."""
    parsed = parse_diff(diff_text)
    try:
        new = apply_diff(original, parsed, target_path)
    except PatchError:
        if all(same_path(p, target_path) for p in parsed.paths):
            raise
        new = original  # refused for the other files anyway; do not retry
    violations = check_guards(parsed, target_path=target_path, original=original, new=new,
                              protected_literals=protected_literals,
                              max_changed_lines=max_changed_lines,
                              max_removed_share=max_removed_share)
    return PreparedPatch(parsed, new, render_unified(original, new, target_path),
                         tuple(violations))
