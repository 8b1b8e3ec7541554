"""PKM Agent code graders: completion, routing, preservation, read-before-write, and ours
(terminal path, redundant files, fact-id placement) that fix the docs/differences.md weaknesses.

All paths are relative to PKM/. Tool paths are virtual (`/` is the PKM root) and are made
relative before they are compared with the outcome's workspace diff and file contents.

The four original graders score exactly as the original harness does (docs/compat.md): routing
strips one leading `/` and capitalises the first letter only of a path with a `/`, and needs
`expected_buckets`; `expected_files: null` is `[]`; an empty `seed_marker` is found in every
file; read-before-write is one assertion and takes the Read's `file_path` or `path`. Unknown
config keys are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from promptloop.agents.transcript import ToolCallRecord
from promptloop.graders.base import (
    Assertion,
    GradeContext,
    GraderConfig,
    Score,
    assertion_score,
    changed_paths,
    file_contents,
    null_score,
    pkm_relative,
    routing_path,
    value_score,
)
from promptloop.graders.registry import register

WRITE_TOOLS = ("Write", "Edit")
MUTATING_TOOLS = ("Write", "Edit", "Move", "Remove")
TerminalPath = Literal["skip", "persist"]


class PkmConfig(GraderConfig):
    """Unknown keys are ignored, as the original harness ignores them (docs/compat.md)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class NoConfig(PkmConfig):
    pass


class RoutingConfig(PkmConfig):
    expected_buckets: list[str]
    expected_files: list[str] = Field(default_factory=list)

    @field_validator("expected_files", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


class NoOverwriteConfig(PkmConfig):
    seed_marker: str
    """May be empty: the empty string is found in every file."""


class ReadBeforeWriteConfig(PkmConfig):
    required_read_path: str


class TerminalPathConfig(PkmConfig):
    expected: TerminalPath | None = None


class NoRedundantFileConfig(PkmConfig):
    expected_files: list[str] = Field(min_length=1)
    max_new_files: int = Field(default=0, ge=0)


def _skipped(ctx: GradeContext) -> bool:
    return bool(ctx.outcome.get("skipped_pkm"))


def _read_key(path: str) -> str:
    """Case-insensitive, one leading `/` ignored, as the original: no trimming, and a second
    leading `/` (`//Areas/x.md`) stays, so that path does not match."""
    return (path[1:] if path.startswith("/") else path).lower()


def original_routing_path(path: str) -> str:
    """The original routing normalisation: strip exactly one leading `/`; capitalise the first
    letter only when the path contains a `/`."""
    rel = path[1:] if path.startswith("/") else path
    if "/" in rel:
        rel = rel[:1].upper() + rel[1:]
    return rel


def read_path(call: ToolCallRecord) -> str:
    """The path a Read was given: `file_path`, else `path` (as the original takes it)."""
    value = call.arguments.get("file_path")
    if value is None:
        value = call.arguments.get("path")
    return value if isinstance(value, str) else ""


def carries_fact_id(call: ToolCallRecord, fact_id: str) -> bool:
    """True when any argument value of the call contains the fact id."""
    return any(isinstance(v, str) and fact_id in v for v in call.arguments.values())


@register("pkm_completion", kind="code", threshold=1.0, config=NoConfig, agent="pkm_agent")
async def pkm_completion(ctx: GradeContext, config: NoConfig) -> Score:
    """The run completed, by persisting (PARA write + insight) or by a clean skip."""
    o = ctx.outcome
    skipped = bool(o.get("skipped_pkm"))
    mutated = bool(o.get("successful_pkm_mutation"))
    missing = list(o.get("missing_requirements") or [])
    assertions = [
        Assertion(description="run is complete", passed=bool(o.get("is_complete"))),
        Assertion(
            description="wrote to PARA with the fact id, or skipped",
            passed=bool(o.get("wrote_para")) or skipped,
        ),
        Assertion(
            description="updated the card insight, or skipped",
            passed=bool(o.get("updated_insight")) or skipped,
        ),
        Assertion(
            description="did not both skip and mutate PKM",
            passed=not (skipped and mutated),
            actual={"skipped_pkm": skipped, "successful_pkm_mutation": mutated},
        ),
        Assertion(
            description="no missing requirements", passed=not missing, actual=missing, expected=[]
        ),
    ]
    return assertion_score("pkm_completion", assertions, 1.0)


@register(
    "pkm_routed_correctly", kind="code", threshold=0.5, config=RoutingConfig, agent="pkm_agent"
)
async def pkm_routed_correctly(ctx: GradeContext, config: RoutingConfig) -> Score:
    """1.0 for a write to an expected file (or under an expected bucket when no files are
    configured), 0.5 for a write under an expected bucket only, else 0.0; null if skipped."""
    name = "pkm_routed_correctly"
    if _skipped(ctx):
        return null_score(name, "the agent skipped PKM organisation; routing does not apply")
    created, modified = changed_paths(ctx.outcome)
    paths = [original_routing_path(p) for p in [*created, *modified]]
    files = {original_routing_path(f) for f in config.expected_files}
    buckets = [original_routing_path(b) for b in config.expected_buckets]
    file_hits = [p for p in paths if p in files]
    bucket_hits = [p for p in paths if any(p.startswith(b) for b in buckets)]
    if file_hits:
        value, why = 1.0, f"wrote to expected file {file_hits[0]}"
    elif bucket_hits and not files:
        value, why = 1.0, f"wrote under an expected bucket: {bucket_hits[0]}"
    elif bucket_hits:
        value, why = (
            0.5,
            f"wrote under an expected bucket ({bucket_hits[0]}) but to no expected file",
        )
    else:
        value, why = 0.0, "no created or modified file matches the expected files or buckets"
    assertions = []
    if files:
        assertions.append(
            Assertion(
                description="wrote to an expected file",
                passed=bool(file_hits),
                actual=paths,
                expected=sorted(files),
            )
        )
    if buckets:
        assertions.append(
            Assertion(
                description="wrote under an expected bucket",
                passed=bool(bucket_hits),
                actual=paths,
                expected=buckets,
            )
        )
    return value_score(name, value, 0.5, assertions, f"{why}; changed: {paths or 'nothing'}")


@register(
    "pkm_no_overwrite", kind="code", threshold=1.0, config=NoOverwriteConfig, agent="pkm_agent"
)
async def pkm_no_overwrite(ctx: GradeContext, config: NoOverwriteConfig) -> Score:
    """The seed marker planted in a fixture file is still present in some PKM file."""
    files = file_contents(ctx.outcome)
    holders = [p for p, text in files.items() if config.seed_marker in text]
    assertion = Assertion(
        description=f"seed marker {config.seed_marker!r} survives in a PKM file",
        passed=bool(holders),
        actual=holders or None,
    )
    return assertion_score("pkm_no_overwrite", [assertion], 1.0)


@register(
    "pkm_read_before_write",
    kind="code",
    threshold=1.0,
    config=ReadBeforeWriteConfig,
    agent="pkm_agent",
)
async def pkm_read_before_write(ctx: GradeContext, config: ReadBeforeWriteConfig) -> Score:
    """A successful Read of the required path comes before the first successful Write/Edit
    (one assertion, as the original)."""
    target = _read_key(config.required_read_path)
    calls = ctx.transcript.successful_calls()
    first_write = next((i for i, c in enumerate(calls) if c.tool_name in WRITE_TOOLS), None)
    reads = [
        i
        for i, c in enumerate(calls)
        if c.tool_name == "Read" and _read_key(read_path(c)) == target
    ]
    before = [i for i in reads if first_write is None or i < first_write]
    assertion = Assertion(
        description=f"read {config.required_read_path} before the first Write/Edit",
        passed=bool(before),
        actual={"first_read_call": reads[0] if reads else None, "first_write_call": first_write},
        expected=config.required_read_path,
    )
    return assertion_score("pkm_read_before_write", [assertion], 1.0)


def expected_terminal_path(
    config: TerminalPathConfig, expected_outcome: Mapping[str, Any] | None
) -> TerminalPath:
    """The intended path: the config's, else the task's reference expected_outcome."""
    if config.expected is not None:
        return config.expected
    raw = (expected_outcome or {}).get("terminal_path")
    if raw is None:
        raise ValueError(
            "terminal_path needs config.expected or "
            "reference_solution.expected_outcome.terminal_path"
        )
    value = str(raw).strip().lower()
    if value == "skip":
        return "skip"
    if value == "persist":
        return "persist"
    raise ValueError(f"expected_outcome.terminal_path must be 'skip' or 'persist', got {raw!r}")


@register("terminal_path", kind="code", threshold=1.0, config=TerminalPathConfig, agent="pkm_agent")
async def terminal_path(ctx: GradeContext, config: TerminalPathConfig) -> Score:
    """1.0 when the agent ended on the intended path (skip cleanly, or persist), else 0.0."""
    o = ctx.outcome
    expected = expected_terminal_path(config, ctx.expected_outcome)
    if expected == "skip":
        assertions = [
            Assertion(
                description="called skip_pkm_organization", passed=bool(o.get("skipped_pkm"))
            ),
            Assertion(
                description="made no successful PKM mutation",
                passed=not o.get("successful_pkm_mutation"),
            ),
        ]
    else:
        assertions = [
            Assertion(
                description="wrote to PARA with the fact id", passed=bool(o.get("wrote_para"))
            ),
            Assertion(
                description="updated the card insight", passed=bool(o.get("updated_insight"))
            ),
        ]
    on_path = all(a.passed for a in assertions)
    actual = "skip" if o.get("skipped_pkm") else ("persist" if o.get("wrote_para") else "neither")
    rationale = (
        f"ended on the intended {expected} path"
        if on_path
        else f"intended {expected}, but the agent's run looks like {actual}: "
        + "; ".join(a.description for a in assertions if not a.passed)
        + " failed"
    )
    return value_score(
        "terminal_path",
        1.0 if on_path else 0.0,
        1.0,
        assertions,
        rationale,
        {"expected": expected, "actual": actual},
    )


@register(
    "pkm_no_redundant_file",
    kind="code",
    threshold=1.0,
    config=NoRedundantFileConfig,
    agent="pkm_agent",
)
async def pkm_no_redundant_file(ctx: GradeContext, config: NoRedundantFileConfig) -> Score:
    """1.0 wrote into an expected file without extra new files, 0.5 with extras, 0.0 when it
    wrote elsewhere (a new file instead); null if skipped."""
    name = "pkm_no_redundant_file"
    if _skipped(ctx):
        return null_score(name, "the agent skipped PKM organisation; nothing was written")
    created, modified = changed_paths(ctx.outcome)
    expected = {routing_path(pkm_relative(f)) for f in config.expected_files}
    changed = [routing_path(pkm_relative(p)) for p in [*created, *modified]]
    new_files = [routing_path(pkm_relative(p)) for p in created]
    into_expected = [p for p in changed if p in expected]
    extra = [p for p in new_files if p not in expected]
    assertions = [
        Assertion(
            description="wrote into an expected existing file",
            passed=bool(into_expected),
            actual=changed,
            expected=sorted(expected),
        ),
        Assertion(
            description=f"created at most {config.max_new_files} other new file(s)",
            passed=len(extra) <= config.max_new_files,
            actual=extra,
        ),
    ]
    if not into_expected:
        value = 0.0
        why = f"did not write into {sorted(expected)}; created {extra or 'nothing'} instead"
    elif len(extra) > config.max_new_files:
        value, why = 0.5, f"wrote into {into_expected[0]} but also created {extra}"
    else:
        value, why = 1.0, f"wrote into {into_expected[0]} without redundant new files"
    return value_score(name, value, 1.0, assertions, why, {"new_files": extra})


def fact_id_comment(fact_id: str) -> re.Pattern[str]:
    """`<!-- fact_id: <id> -->`, tolerant of whitespace inside the comment."""
    return re.compile(r"<!--\s*fact_id:\s*" + re.escape(fact_id) + r"\s*-->")


@register("pkm_fact_id_placement", kind="code", threshold=1.0, config=NoConfig, agent="pkm_agent")
async def pkm_fact_id_placement(ctx: GradeContext, config: NoConfig) -> Score:
    """The fact-id comment is in a file changed in this trial, the one whose Write/Edit carried
    the fact id; null if skipped."""
    name = "pkm_fact_id_placement"
    if _skipped(ctx):
        return null_score(name, "the agent skipped PKM organisation; no fact id to place")
    if ctx.fact_id is None:
        return null_score(name, "the task has no input.fact_id (a PKM Agent task needs one)")
    created, modified = changed_paths(ctx.outcome)
    changed = {pkm_relative(p) for p in [*created, *modified]}
    files = file_contents(ctx.outcome)
    pattern = fact_id_comment(ctx.fact_id)
    carriers = {
        pkm_relative(str(c.arguments.get("file_path", "")))
        for c in ctx.transcript.successful_calls(*WRITE_TOOLS)
        if carries_fact_id(c, ctx.fact_id)
    }
    with_comment = sorted(p for p in changed if pattern.search(files.get(p, "")))
    assertions = [
        Assertion(
            description="a successful Write/Edit carried the fact id",
            passed=bool(carriers),
            actual=sorted(carriers) or None,
        ),
        Assertion(
            description=f"'<!-- fact_id: {ctx.fact_id} -->' is in a file changed in this trial",
            passed=bool(with_comment),
            actual=with_comment or None,
            expected=sorted(changed),
        ),
        Assertion(
            description="the comment is in the file whose Write/Edit carried the fact id",
            passed=bool(set(with_comment) & carriers),
            actual=with_comment or None,
            expected=sorted(carriers) or None,
        ),
    ]
    return assertion_score(name, assertions, 1.0)
