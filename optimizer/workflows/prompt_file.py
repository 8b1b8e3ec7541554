"""Writing a candidate prompt into its file on the candidate's branch.

The text a proposal produced replaces only the prompt target's region of the file as the base
holds it (`core/prompt_target.PromptSource.splice`): a whole-file target is the file, a literal
or a marker region changes only its own lines. A text that would break the literal for its
language (closing it early, an odd trailing backslash, a new interpolation) is refused before
any trial, naming the region.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optimizer.core.regions import RegionError
from optimizer.workflows.optimize_models import Baseline


@dataclass(frozen=True)
class RegionRefusal:
    why: str


def region_refusal(base: Baseline, new_text: str) -> RegionRefusal | None:
    """Why `new_text` cannot go into the target's region (None: it can)."""
    if base.prompt_source is None:
        return None
    why = base.prompt_source.check(new_text)
    return RegionRefusal(why) if why else None


def splice_prompt(base: Baseline, worktree: Path, new_text: str) -> Path | RegionRefusal:
    """Write `new_text` into the prompt target's file in `worktree` (at the base commit);
    the file written, or the refusal when the text cannot go into the region."""
    source = base.prompt_source
    if source is None:
        raise ValueError("the baseline has no prompt source")
    refused = region_refusal(base, new_text)
    if refused is not None:
        return refused
    try:
        text = source.splice(new_text)
    except RegionError as err:
        return RegionRefusal(str(err))
    path = worktree / source.path
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["RegionRefusal", "region_refusal", "splice_prompt"]
