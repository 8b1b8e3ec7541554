"""Guards for a prompt that is a region of a source file (a string literal, or the lines
between two markers; `optimizer.core.regions`).

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

from optimizer.core.regions import (
    BreaksLiteralError,
    Region,
    RegionError,
    RegionSpec,
    edited_region_text,
    locate,
    splice,
    value_of,
)
from optimizer.propose.apply import apply_diff, render_unified
from optimizer.propose.guards import (
    DEFAULT_MAX_ADDED_CHARS,
    DEFAULT_MAX_CHANGED_LINES,
    DEFAULT_MAX_REMOVED_SHARE,
    GuardCode,
    GuardViolation,
    PreparedPatch,
    prepare_patch,
)
from optimizer.propose.literals import LiteralIndex
from optimizer.propose.patch import PatchError, parse_diff
from optimizer.propose.watch import OutsideWriteError


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
