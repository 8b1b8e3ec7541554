"""The constrained edit format for weak proposer models.

A small model cannot be trusted to count diff lines, but it can copy one existing line of the
prompt and say what to do next to it. `EditProposal` is that format (JSON, grammar friendly:
no $refs, enums as strings); `apply_edits` resolves every anchor against the original file and
the result is rendered into the same canonical unified diff as a free-form proposal.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from promptloop.optimizer.propose.apply import join_lines, render_unified, split_lines
from promptloop.optimizer.propose.patch import PatchError

EditAction = Literal["insert_after", "insert_before", "replace", "delete"]
_LINE_NUMBER_RE = re.compile(r"^\s*\d+\s*(?:[:|\t→]|\s{2,})\s?")
_MIN_SUBSTRING_ANCHOR = 15


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: EditAction
    anchor: str = Field(description="An existing line of the prompt file, copied exactly.")
    text: str = Field(default="", description="New line(s); empty for delete.")


class EditProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hypothesis: str = Field(min_length=1)
    edits: list[Edit] = Field(min_length=1)


EDIT_PROPOSAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "hypothesis": {"type": "string"},
        "edits": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "action": {"type": "string",
                               "enum": ["insert_after", "insert_before", "replace", "delete"]},
                    "anchor": {"type": "string"},
                    "text": {"type": "string"},
                },
                "required": ["action", "anchor", "text"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["hypothesis", "edits"],
    "additionalProperties": False,
}
"""JSON schema of `EditProposal`, flat enough for grammar-constrained decoding."""


def edit_schema_for(original: str, *, max_edits: int = 2) -> dict[str, Any]:
    """EDIT_PROPOSAL_SCHEMA with `anchor` restricted to the file's own non-blank lines and at
    most `max_edits` edits: under grammar-constrained decoding even a tiny model then names an
    anchor that exists, so its edit always applies."""
    lines = list(dict.fromkeys(ln.strip() for ln in original.splitlines() if ln.strip()))
    schema = copy.deepcopy(EDIT_PROPOSAL_SCHEMA)
    edits = schema["properties"]["edits"]
    edits["maxItems"] = max_edits
    schema["properties"]["hypothesis"]["maxLength"] = 200
    edits["items"]["properties"]["text"]["maxLength"] = 300
    if lines:
        edits["items"]["properties"]["anchor"] = {"type": "string", "enum": lines}
    return schema


def parse_edit_proposal(model_text: str) -> EditProposal:
    """Read an EditProposal from a reply: the first JSON object, fenced or not."""
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", model_text, re.DOTALL)
    text = fenced.group(1) if fenced else model_text
    start = text.find("{")
    if start < 0:
        raise PatchError('no JSON object found: answer with {"hypothesis": ..., "edits": [...]}',
                         user="the reply contained no JSON edits")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as err:
        raise PatchError(f"the JSON is invalid at character {err.pos}: {err.msg}") from err
    try:
        return EditProposal.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                             for e in err.errors())
        raise PatchError(f"the edit proposal does not match the schema: {problems}") from err


def _locate(lines: list[str], anchor: str, index: int) -> int:
    """Index of the one line matching `anchor` (after strip); numbered copies are tolerated."""
    wanted = anchor.strip()
    if not wanted:
        raise PatchError(f"edit {index + 1}: the anchor is blank; copy a non-blank line of the "
                         "file as the anchor", user=f"edit {index + 1} has a blank anchor line")
    for candidate in (wanted, _LINE_NUMBER_RE.sub("", wanted, count=1).strip()):
        if not candidate:
            continue
        hits = [i for i, line in enumerate(lines) if line.strip() == candidate]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise PatchError(f"edit {index + 1}: the anchor {anchor!r} matches lines "
                             f"{', '.join(str(h + 1) for h in hits)}; choose a line that occurs "
                             "once in the file",
                             user=f"edit {index + 1}: its anchor line occurs several times in "
                             "the file")
    if len(wanted) >= _MIN_SUBSTRING_ANCHOR:
        hits = [i for i, line in enumerate(lines) if wanted in line]
        if len(hits) == 1:
            return hits[0]
    close = difflib.get_close_matches(wanted, [ln.strip() for ln in lines if ln.strip()],
                                      n=3, cutoff=0.5)
    hint = ("; closest lines: " + " | ".join(repr(c) for c in close)) if close else ""
    raise PatchError(f"edit {index + 1}: the anchor {anchor!r} is not a line of the file{hint}. "
                     "Copy one existing line exactly (without its line number).",
                     user=f"edit {index + 1}: its anchor {anchor!r} is not a line of the file")


def apply_edits(original: str, edits: list[Edit]) -> str:
    """Apply anchored edits; all anchors refer to lines of `original`, not to earlier edits."""
    lines, trailing = split_lines(original)
    before: dict[int, list[str]] = {}
    after: dict[int, list[str]] = {}
    replaced: dict[int, list[str]] = {}
    for i, edit in enumerate(edits):
        at = _locate(lines, edit.anchor, i)
        new = split_lines(edit.text)[0] if edit.text.strip() else []
        if edit.action in ("insert_after", "insert_before"):
            if not new:
                raise PatchError(f"edit {i + 1}: {edit.action} needs a non-empty text")
            (after if edit.action == "insert_after" else before).setdefault(at, []).extend(new)
        else:
            if at in replaced:
                raise PatchError(f"edit {i + 1}: line {at + 1} is already replaced or deleted "
                                 "by an earlier edit; combine them into one edit",
                                 user=f"edits of the proposal overlap (line {at + 1} is edited "
                                 "twice)")
            replaced[at] = new if edit.action == "replace" else []
    out: list[str] = []
    for i, line in enumerate(lines):
        out.extend(before.get(i, []))
        out.extend(replaced.get(i, [line]))
        out.extend(after.get(i, []))
    return join_lines(out, trailing or (not lines and bool(out)))


def edits_to_diff(original: str, proposal: EditProposal, path: str) -> str:
    """The canonical unified diff of an edit proposal (what the ledger and git see)."""
    return render_unified(original, apply_edits(original, proposal.edits), path)
