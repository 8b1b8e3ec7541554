"""Guards for a prompt that is a region of a source file (a string literal, or the lines
between two markers; `promptloop.optimizer.core.regions`).

The proposer sees and patches the region's text only, numbered from its line 1 (the package
numbers whatever prompt text it is given). `prepare_region_patch` runs the usual
`prepare_patch` on that text, then splices the result into the whole file: a patch whose hunks
do not apply to the region (its context is a line outside, such as an import above the
literal) is a `PatchError` naming the region, so the model is told and, at the last attempt,
the proposal is refused; new text that would break the literal for the host language (its
closing delimiter, an escaping backslash, a new interpolation...) is a `breaks_literal`
`GuardViolation`, refused before any trial like every other guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from promptloop.optimizer.core.regions import (
    BreaksLiteralError,
    Region,
    RegionError,
    RegionSpec,
    check_literal,
    edited_region_text,
    locate,
    splice,
    value_of,
)
from promptloop.optimizer.propose.apply import apply_diff, render_unified
from promptloop.optimizer.propose.guards import (
    DEFAULT_MAX_ADDED_CHARS,
    DEFAULT_MAX_CHANGED_LINES,
    DEFAULT_MAX_REMOVED_SHARE,
    GuardCode,
    GuardViolation,
    PreparedPatch,
    prepare_patch,
)
from promptloop.optimizer.propose.literals import LiteralIndex
from promptloop.optimizer.propose.patch import PatchError, parse_diff
from promptloop.optimizer.propose.watch import OutsideWriteError


def check_region_patch(spec: RegionSpec, file_text: str, new_text: str) -> str | None:
    """Why the region `spec` of `file_text` may not become `new_text` (source form); None
    when it may. The reason names the region."""
    try:
        splice(spec, file_text, new_text)  # locates, checks the literal, splices, re-locates
    except RegionError as err:
        return str(err)
    return None


def region_violation(spec: RegionSpec, file_text: str, new_text: str) -> GuardViolation | None:
    """`check_region_patch` as a guard refusal (code `breaks_literal`)."""
    reason = check_region_patch(spec, file_text, new_text)
    return None if reason is None else GuardViolation("breaks_literal", reason)


@dataclass(frozen=True)
class RegionPatch:
    """A proposal for a region: the usual prepared patch of the region's text, and the file."""

    region: Region
    """The region in the base file."""
    prepared: PreparedPatch
    """`prepare_patch` on the region's text: `new_text` is the region's new source text,
    `diff` its region-relative canonical diff (what the ledger keeps, line 1 = the region's
    first line), `violations` every guard's refusals, `breaks_literal` included."""
    file_text: str
    """The whole new file (the base file unchanged when refused): what the branch commits."""
    file_diff: str
    """`render_unified(base file, file_text, path)`: touches only the region's lines."""
    value: str
    """The region's new runtime value (escapes decoded): the prompt the agent gets."""

    @property
    def accepted(self) -> bool:
        return self.prepared.accepted


def region_apply_error(err: PatchError, diff_text: str, region: Region,
                       file_text: str) -> PatchError:
    """`err` (a diff that does not apply to the region's text) reworded to name the region;
    a diff that applies to the whole file but not to the region edits, or anchors on, lines
    outside it and is told so. Raise it where `prepare_patch`'s PatchError is caught."""
    first = region.start_line
    numbering = (f"the proposer sees only {region.describe()}, numbered from 1 (its line 1 is "
                 f"file line {first}); copy context and '-' lines from that text")
    try:
        apply_diff(file_text, parse_diff(diff_text), region.path)
    except PatchError:
        return PatchError(f"{err} ({numbering})", user=f"{err.user} (in {region.describe()})")
    outside = (f"the patch edits {region.path} outside {region.describe()}: its hunks "
               "match lines of the file around the region, not the region's text; only "
               "the region may change")
    return PatchError(f"{outside} ({numbering})", user=outside)


def prepare_region_patch(
    diff_text: str,
    *,
    spec: RegionSpec,
    file_text: str,
    protected_literals: LiteralIndex,
    max_changed_lines: int = DEFAULT_MAX_CHANGED_LINES,
    max_removed_share: float = DEFAULT_MAX_REMOVED_SHARE,
    max_added_chars: int = DEFAULT_MAX_ADDED_CHARS,
) -> RegionPatch:
    """`prepare_patch` for the region `spec` of `file_text`: the diff is read against the
    region's text (its paths must name `spec.path`). Raises `PatchError` (naming the region)
    when it does not apply to the region, `RegionError` when the base file has no such region;
    a patch that would break the literal is refused with a `breaks_literal` violation."""
    region = locate(spec, file_text)
    try:
        prepared = prepare_patch(diff_text, target_path=spec.path, original=region.text,
                                 protected_literals=protected_literals,
                                 max_changed_lines=max_changed_lines,
                                 max_removed_share=max_removed_share,
                                 max_added_chars=max_added_chars)
    except PatchError as err:
        if spec.kind == "file":
            raise
        raise region_apply_error(err, diff_text, region, file_text) from err
    violation = None
    if prepared.new_text != region.text:
        violation = region_violation(spec, file_text, prepared.new_text)
    if violation is not None:
        prepared = PreparedPatch(prepared.parsed, prepared.new_text, prepared.diff,
                                 (*prepared.violations, violation))
    if not prepared.accepted:
        return RegionPatch(region, prepared, file_text, "", value_of(region))
    new_file = splice(spec, file_text, prepared.new_text)
    return RegionPatch(region, prepared, new_file,
                       render_unified(file_text, new_file, spec.path),
                       value_of(locate(spec, new_file)))


def region_diff_from_edit(spec: RegionSpec, old_file: str, new_file: str) -> str:
    """The region-relative diff of an external proposer's edit of the whole file (what
    `prepare_region_patch` takes). An edit that changed the file outside the region
    (`outside_region`), or broke the literal so the region cannot be found
    (`breaks_literal`), is an `OutsideWriteError`, refused like a write outside the prompt
    file; its message names the region."""
    region = locate(spec, old_file)
    try:
        new_region = edited_region_text(spec, old_file, new_file)
    except RegionError as err:
        code: GuardCode = ("breaks_literal" if isinstance(err, BreaksLiteralError)
                           else "outside_region")
        raise OutsideWriteError([GuardViolation(code, str(err))]) from None
    return render_unified(region.text, new_region, spec.path)


HeadCode = Literal["ok", "breaks_literal", "outside_region", "code_changed"]


@dataclass(frozen=True)
class HeadCheck:
    """What the region guard says of a reviewed head's version of a prompt's source file.

    `breaks_literal` and `outside_region` fail the guard (the review's verdict is "broken");
    `code_changed` passes it: the region is as at the base, but code elsewhere in the file
    changed (not a prompt change); `ok`: at most the region's text changed, validly."""

    code: HeadCode
    reason: str = ""
    line: int | None = None
    """The head file's line (1-based) where the guard failed or the code changed."""
    region: str = ""
    """The region as the base holds it, without its path (`Region.describe(with_path=False)`:
    'triple-quoted string X (lines 6-25)')."""

    @property
    def failed(self) -> bool:
        return self.code in ("breaks_literal", "outside_region")


def check_head_file(base_spec: RegionSpec, base_file: str, head_spec: RegionSpec,
                    head_file: str) -> HeadCheck | None:
    """The region guard optimize applies to a patch, applied to a head's whole file (review):

    - only the region's text changed: that text must not break the literal (closing it early,
      a new interpolation, a stray `$` in Dart, an invalid escape...): `breaks_literal`;
    - the file changed outside the region too: the head's region must still be found and be a
      valid edit of the base's (`breaks_literal` otherwise); when the region's text changed
      as well, the edit outside it fails the guard as it does for optimize (`outside_region`:
      the head changes code, not only the prompt); so does any edit of a source file outside
      its region when the region is unchanged (an edit of the literal's own statement, its
      opening or closing line or a line added right after it, is named as such), and of a
      YAML, JSON or TOML file outside its markers (the configuration the agent reads); only
      a Markdown or text file's lines outside its markers are `code_changed` (a note).

    None when the base file has no such region (nothing to guard against: the review reads
    the base as before and says what is wrong there)."""
    try:
        base = locate(base_spec, base_file)
    except RegionError:
        return None
    what = short = base.describe(with_path=False)
    if base_file == head_file or base_spec.kind == "file":
        return HeadCheck("ok", region=what)
    if base_spec == head_spec:
        try:
            edited_region_text(base_spec, base_file, head_file)
            return HeadCheck("ok", region=what)
        except BreaksLiteralError as err:
            line = base.file_line(err.line) if err.line else _first_change(base_file, head_file)
            return HeadCheck("breaks_literal", str(err), line, what)
        except RegionError:
            pass  # the file changed outside the region: judged below
    try:
        head = locate(head_spec, head_file)
    except RegionError as err:
        return HeadCheck("breaks_literal", f"at the head, {err}",
                         _first_change(base_file, head_file), what)
    if head.text != base.text:
        try:
            check_literal(base, head.text)
        except BreaksLiteralError as err:
            line = head.file_line(err.line) if err.line else _first_change(base_file, head_file)
            return HeadCheck("breaks_literal", str(err), line, what)
    outside = _outside_changes(base_file, base, head_file, head)
    if not outside:
        return HeadCheck("ok", region=what)
    line = outside[0][2] + 1
    lines = sorted({j1 + 1 for _, _, j1 in outside})
    at = (f"line {lines[0]}" if len(lines) == 1 else
          "lines " + ", ".join(map(str, lines[:6])) + (", ..." if len(lines) > 6 else ""))
    data = base.path.lower().endswith(DATA_SUFFIXES)
    if base.language == "other" and not data:  # Markdown or text: nothing runs around it
        return HeadCheck("code_changed", f"{base.path} changes outside {short} ({at}): "
                         "not the prompt; review does not evaluate it", line, what)
    if data and head.text == base.text:  # a configuration-only change: nothing to gate
        return HeadCheck("code_changed", f"{base.path} changes the configuration the agent "
                         f"reads outside {short} ({at}), not the prompt: review does not "
                         "evaluate it (`promptloop eval` on the branch shows its effect)",
                         line, what)
    if data:  # with the prompt: the configuration's effect would be read as the prompt's
        return HeadCheck("outside_region", f"the head changes {base.path} outside {short} "
                         f"({at}): it changes the configuration the agent reads, not only the "
                         "prompt, and review evaluates prompts: put the configuration change "
                         "in a pull request of its own", line, what)
    if head.text != base.text:
        return HeadCheck("outside_region", f"the head changes {base.path} outside {short} "
                         f"(line {line}): it changes code, not only the prompt; only the "
                         "region's text may change in a prompt change (review does not "
                         "evaluate code): put the code change in a pull request of its own",
                         line, what)
    first, last = _statement_lines(base)
    for i1, i2, j1 in outside:
        if (i1 < i2 and i1 < last and i2 >= first) or (i1 == i2 and first <= i1 <= last):
            return HeadCheck("outside_region", f"the head changes {base.path} at line "
                             f"{j1 + 1}, outside {short} but in its statement or right after "
                             "it: it changes code, not only the prompt (or text meant for the "
                             "prompt landed outside the literal); only the region's text may "
                             "change in a prompt change: put a code change in a pull request "
                             "of its own", j1 + 1, what)
    return HeadCheck("outside_region", f"the head changes {base.path} outside {short} "
                     f"(line {line}): it changes code, not only the prompt, and review "
                     "evaluates prompts, not code: put the code change in a pull request of "
                     "its own", line, what)


DATA_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
"""Files whose lines outside a marker region are configuration, not prose: an edit there is
judged like an edit of code around a literal."""


def _first_change(old: str, new: str) -> int:
    """The first line (1-based) where `new` differs from `old`."""
    for n, (a, b) in enumerate(zip(old.split("\n"), new.split("\n"), strict=False), start=1):
        if a != b:
            return n
    return min(old.count("\n"), new.count("\n")) + 1


def _statement_lines(region: Region) -> tuple[int, int]:
    """The 1-based file lines of the region's opening and closing: the literal's opening and
    closing quotes, or the begin and end markers."""
    first = region.start_line - (1 if region.kind == "markers" else 0)
    return first, region.start_line + region.text.count("\n")


def _outside_changes(old_file: str, old: Region, new_file: str,
                     new: Region) -> list[tuple[int, int, int]]:
    """(old first, old end, new first) 0-based line ranges of the changes between the files
    that are not wholly inside the region's own lines (between its opening and closing lines)
    on both sides."""
    old_lines, new_lines = old_file.split("\n"), new_file.split("\n")
    (a, b), (c, d) = _statement_lines(old), _statement_lines(new)
    inside_old, inside_new = range(a, b - 1), range(c, d - 1)  # 0-based, between the two
    out: list[tuple[int, int, int]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old_lines, new_lines,
                                               autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        within = (all(i in inside_old for i in range(i1, i2))
                  and all(j in inside_new for j in range(j1, j2)))
        if not within:
            out.append((i1, i2, j1))
    return out
