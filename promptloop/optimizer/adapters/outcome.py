"""What one adapter trial came to (`AdapterOutcome`), and the reading of a result document.

- `ok`: a valid result without an error (the caller grades its outcome);
- `failed`: the agent caused it (its result says `error.cause = "agent"`, or it wrote outside
  its workspace): the trial counts as a failure;
- `errored`: anything else that kept the trial from giving a result (non-zero exit, timeout,
  nothing printed, invalid JSON, a missing field, oversize output, `error.cause =
  "infrastructure"`): not counted.

Every message starts with `<agent> task <id> trial <index>:` and names the field or the cause;
messages and stderr tails are redacted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from promptloop.optimizer.adapters.contract import CONTRACT, TrialRequest, TrialResultDoc
from promptloop.optimizer.adapters.process import clean

Status = Literal["ok", "failed", "errored"]
MESSAGE_TAIL = 600
"""Characters of stderr quoted in a message (the whole tail is in `stderr_tail`)."""


class AgentRaised(Exception):
    """An in-process agent's own code raised (a python adapter's function): the trial fails."""


class AdapterConfigError(ValueError):
    """The adapter cannot run at all as configured (a python entry that does not import, a
    worker adapter without a pool...): a user error, not a trial outcome."""


@dataclass
class AdapterOutcome:
    status: Status
    result: TrialResultDoc | None = None
    message: str | None = None
    """None when ok; else `<agent> task <id> trial <i>: <cause>` (redacted)."""
    stderr_tail: str = ""
    """The end of what the process wrote on stderr during the trial (redacted)."""
    timed_out: bool = False
    """The trial ran past its time limit (its process group was killed)."""


@dataclass(frozen=True)
class TrialLabel:
    """Names one trial in messages, and redacts them."""

    agent: str
    request: TrialRequest

    @property
    def prefix(self) -> str:
        return f"{self.agent} task {self.request.task_id} trial {self.request.trial.index}"

    def clean(self, text: str) -> str:
        return clean(text, self.request)

    def outcome(
        self,
        status: Status,
        why: str,
        *,
        stderr: str = "",
        result: TrialResultDoc | None = None,
        timed_out: bool = False,
        quote_stderr: bool = False,
    ) -> AdapterOutcome:
        tail = self.clean(stderr)
        if quote_stderr and tail:
            quoted = tail if len(tail) <= MESSAGE_TAIL else "..." + tail[-MESSAGE_TAIL:]
            why = f"{why}: {quoted}"
        return AdapterOutcome(status=status, result=result,
                              message=self.clean(f"{self.prefix}: {why}"),
                              stderr_tail=tail, timed_out=timed_out)

    def errored(self, why: str, **kw: Any) -> AdapterOutcome:
        return self.outcome("errored", why, **kw)

    def failed(self, why: str, **kw: Any) -> AdapterOutcome:
        return self.outcome("failed", why, **kw)


def field_problem(err: ValidationError) -> str:
    """The first problem of a result that does not validate, naming its field."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(the document)"
    if first["type"] == "missing":
        return f"result is missing the required field `{loc}`"
    if loc == "contract":
        return (f"result field `contract` is {first.get('input')!r}; this promptloop speaks "
                f"{CONTRACT!r}")
    return f"result field `{loc}`: {first['msg']}"


def judge_doc(doc: TrialResultDoc, label: TrialLabel, stderr: str = "") -> AdapterOutcome:
    """ok, or failed / errored by the cause the result's `error` names."""
    if doc.error is None:
        return AdapterOutcome(status="ok", result=doc, stderr_tail=label.clean(stderr))
    said = f": {doc.error.message}" if doc.error.message else ""
    if doc.error.cause == "agent":
        return label.failed(f"the agent reported an error{said}", stderr=stderr, result=doc)
    return label.errored(f"the agent reported an infrastructure error{said}", stderr=stderr,
                         result=doc)


def plain_outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    """Outcome values as plain JSON data, so cached and saved trials load back identically."""
    return {
        k: (v.model_dump(mode="json") if isinstance(v, BaseModel) else v)
        for k, v in outcome.items()
    }


_KINDS = {list: "a JSON array", str: "a JSON string", bool: "a JSON boolean",
          int: "a JSON number", float: "a JSON number", type(None): "null"}


def validate_doc(value: Any, label: TrialLabel, source: str,
                 stderr: str = "") -> AdapterOutcome:
    """A result value (parsed JSON, a dict or a TrialResultDoc) judged."""
    if isinstance(value, TrialResultDoc):
        return judge_doc(value, label, stderr)
    if not isinstance(value, dict):
        kind = _KINDS.get(type(value), f"a {type(value).__name__}")
        return label.errored(f"{source} {kind}, not a result object", stderr=stderr)
    try:
        doc = TrialResultDoc.model_validate(value)
    except ValidationError as err:
        return label.errored(field_problem(err), stderr=stderr)
    return judge_doc(doc, label, stderr)


QUOTE_CHARS = 200
"""How much of a result that is no JSON an error quotes (`printed invalid JSON ...: 'hello'`)."""


def _quote(text: str) -> str:
    """`text` (already cleaned of keys) as a short quote: stray prints are the usual cause."""
    flat = text.strip()
    if len(flat) <= QUOTE_CHARS:
        return repr(flat)
    return f"{flat[:QUOTE_CHARS]!r}... ({len(flat)} characters)"


def parse_result(data: bytes, label: TrialLabel, source: str = "printed",
                 stderr: str = "") -> AdapterOutcome:
    """The result document in `data` (what the process printed or wrote) judged; `source` says
    where it came from in messages (`printed`, `wrote in its result file`, `answered`)."""
    if not data.strip():
        return label.errored(f"{source} nothing (no result)", stderr=stderr, quote_stderr=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return label.errored(f"{source} invalid UTF-8 at byte {err.start}", stderr=stderr)
    text = label.clean(text)  # a key the agent found anyway never reaches a report
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        stray = (source == "printed" and err.pos == 0
                 and not text.lstrip().startswith(("{", "[", '"')))
        return label.errored(
            f"{source} invalid JSON: {err.msg} at line {err.lineno} column {err.colno} "
            f"(character {err.pos}); it {source}: {_quote(text)}"
            + ("; stdout carries only the result document: write logs to stderr" if stray
               else ""), stderr=stderr,
        )
    return validate_doc(value, label, source, stderr)


__all__ = [
    "AdapterConfigError",
    "AdapterOutcome",
    "AgentRaised",
    "Status",
    "TrialLabel",
    "field_problem",
    "judge_doc",
    "parse_result",
    "plain_outcome",
    "validate_doc",
]
