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

from promptloop.optimizer.core.regions import RegionError
from promptloop.optimizer.workflows.optimize_models import Baseline


@dataclass(frozen=True)
class RegionRefusal:
    why: str


def splice_prompt(base: Baseline, worktree: Path, new_text: str) -> Path | RegionRefusal:
    """Write `new_text` into the prompt target's file in `worktree` (at the base commit);
    the file written, or the refusal when the text cannot go into the region."""
    source = base.prompt_source
    if source is None:
        raise ValueError("the baseline has no prompt source")
    try:  # the guards refused a text that breaks the literal already (prepare_region_patch)
        text = source.splice(new_text)
    except RegionError as err:
        return RegionRefusal(str(err))
    path = worktree / source.path
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["RegionRefusal", "splice_prompt"]
