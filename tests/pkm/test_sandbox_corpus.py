"""Adversarial corpus for the PKM sandbox (issue 14): every case is an attack with its expected
refusal, run on a fresh workspace planted with symlinks, a hard link and canary files outside
PKM/.

For every case and every tool call: nothing outside PKM/ is read (the canary text and the names
of outside-only files never appear in a result), nothing outside PKM/ is written (every file
outside PKM/, the rest of the workspace included, keeps its bytes and mtime; no entry appears or
disappears) and no result contains a real host path. Then the expected verdict: `refused` (every
call is an error naming the reason) or `confined` (the call may succeed, inside PKM/ only).

TOCTOU cases swap a path component for a symlink to the outside after the path was validated
(after `Sandbox.resolve`, or right before the I/O call), so only opening without following
links (O_NOFOLLOW, descriptor by descriptor) keeps the tools inside.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.pkm.paths import Sandbox
from promptloop.agents.workspace import Workspace
from tests.pkm.conftest import invoke, make_session, write

CANARY = "CANARY-CONTENT-4242"
OUTSIDE_NAME = "zz_outside_only"
"""Part of every outside-only file name: a listing that shows it has looked outside."""

PLAN = "/Projects/Garden/plan.md"
Call = tuple[str, dict[str, Any]]
Swap = Literal["parent", "final"]


@dataclass
class Env:
    tmp: Path
    ws: Workspace
    outside: Path
    session: PkmAgentSession
    swapped: bool = False

    def fill(self, value: Any) -> Any:
        """Replace @OUT@ / @WS@ / @PKM@ with real host paths in call arguments."""
        if isinstance(value, str):
            return (
                value.replace("@OUT@", str(self.outside))
                .replace("@WS@", str(self.ws.root))
                .replace("@PKM@", str(self.ws.pkm))
            )
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Case:
    id: str
    calls: list[Call]
    expect: Literal["refused", "confined"]
    reason: str = ""
    """Substring every refusal must contain (lower-cased comparison)."""
    swap: Swap | None = None
    hook: str = "resolve"
    """Sandbox method around which the swap happens: after `resolve`, before any other."""
    hook_call: int = 1
    """Swap at this call of the hooked method (1 = the first)."""
    check: Callable[[Env], None] | None = field(default=None, compare=False)


def _plant(tmp: Path) -> tuple[Workspace, Path]:
    outside = tmp / "outside"
    write(outside, f"{OUTSIDE_NAME}_secret.txt", f"{CANARY}: secret\n")
    write(outside, "dir/sleep.md", f"{CANARY}: outside sleep log\n")
    write(outside, f"dir/{OUTSIDE_NAME}_inner.md", f"{CANARY}: inner\n")
    write(outside, "hard_source.md", f"{CANARY}: hard-linked\n")
    ws = Workspace(tmp / "ws")
    write(ws.pkm, "Areas/Health/sleep.md", "# Sleep\n- 03-10: 5.5 h\n")
    write(ws.pkm, "Projects/Garden/plan.md", "# Garden plan\n- buy seeds\n")
    write(ws.pkm, "Resources/Cooking/recipes.md", "# Recipes\n- lentil soup\n")
    pkm = ws.pkm
    os.symlink(outside / f"{OUTSIDE_NAME}_secret.txt", pkm / "link_file.md")
    os.symlink(outside, pkm / "link_dir")
    os.symlink(outside / "dir", pkm / "Areas" / "escape")
    os.symlink(outside / f"{OUTSIDE_NAME}_missing.md", pkm / "dangling.md")
    os.symlink(pkm / "link_dir", pkm / "Areas" / "chain")  # inside link -> link out
    os.symlink("../../outside", pkm / "rel_up")  # relative link climbing out
    os.link(outside / "hard_source.md", pkm / "Areas" / "hard.md")
    write(ws.system, "pkm_stats.json", '{"version": 1, "sessions": []}\n')
    return ws, outside


def _state(tmp: Path, pkm: Path) -> dict[str, tuple[Any, ...]]:
    """Everything under tmp except PKM/: file bytes and mtime, link targets, folders."""
    state: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(tmp, followlinks=False):
        here = Path(dirpath)
        if here == pkm:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            path = here / name
            if path == pkm:
                continue
            rel = path.relative_to(tmp).as_posix()
            st = os.lstat(path)
            if path.is_symlink():
                state[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                state[rel] = ("dir",)
            else:
                state[rel] = ("file", path.read_bytes(), st.st_mtime_ns)
    return state


def _swap(env: Env, kind: Swap) -> None:
    env.swapped = True
    pkm = env.ws.pkm
    if kind == "parent":
        health = pkm / "Areas" / "Health"
        health.rename(pkm / "Areas" / "Health.orig")
        os.symlink(env.outside / "dir", health)
    else:
        sleep = pkm / "Areas" / "Health" / "sleep.md"
        sleep.rename(sleep.with_name("sleep.md.orig"))
        os.symlink(env.outside / f"{OUTSIDE_NAME}_secret.txt", sleep)


def _install_hook(monkeypatch: pytest.MonkeyPatch, env: Env, case: Case) -> None:
    if case.swap is None:
        return
    original = getattr(Sandbox, case.hook)
    calls = {"n": 0}
    kind = case.swap

    def hooked(self: Sandbox, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        due = calls["n"] == case.hook_call
        if due and case.hook != "resolve":
            _swap(env, kind)
        result = original(self, *args, **kwargs)
        if due and case.hook == "resolve":
            _swap(env, kind)
        return result

    monkeypatch.setattr(Sandbox, case.hook, hooked)


def _each_tool(path: str) -> list[Call]:
    """The path in every path argument of every tool."""
    return [
        ("Read", {"file_path": path}),
        ("BatchRead", {"file_patterns": [path]}),
        ("Write", {"file_path": path, "content": "pwned"}),
        ("Edit", {"file_path": path, "old_string": CANARY, "new_string": "pwned"}),
        ("Edit", {"file_path": path, "old_string": "", "new_string": "pwned"}),
        ("Move", {"source_path": path, "destination_path": "/moved.md"}),
        ("Move", {"source_path": PLAN, "destination_path": path, "overwrite": True}),
        ("Remove", {"path": path, "confirm": True}),
        ("LS", {"path": path}),
        ("Glob", {"pattern": "*", "path": path}),
        ("Grep", {"pattern": "4242", "path": path}),
    ]


def _created_inside(rel: str) -> Callable[[Env], None]:
    def check(env: Env) -> None:
        assert (env.ws.pkm / rel).is_file(), f"expected {rel} to be created inside PKM/"

    return check


UP = "../../outside/" + OUTSIDE_NAME + "_secret.txt"
LEAVES = "leaves the pkm root"
OUTSIDE_LINK = "outside the pkm root"
LINK_REFUSED = "refusing to follow it"
NFD_NAME = unicodedata.normalize("NFD", "/Areas/café.md")
DEEP = "/" + "d/" * 32 + "x.md"
"""33 levels: one more than the tools allow (issue 19)."""
LONG = "/" + "/".join(["n" * 200] * 6) + "/x.md"
"""1,211 characters in 7 levels, each name under 255 bytes: longer than the tools allow."""
TOO_DEEP = "deeper than 32 levels"
TOO_LONG = "longer than 1,024 characters"

CASES: list[Case] = [
    # -- bounded trees (issue 19): too deep or too long in every path argument ----------------
    *(Case(f"deep-{tool}-{i}", [(tool, args)], "refused", TOO_DEEP)
      for i, (tool, args) in enumerate(_each_tool(DEEP))),
    *(Case(f"long-{tool}-{i}", [(tool, args)], "refused", TOO_LONG)
      for i, (tool, args) in enumerate(_each_tool(LONG))),
    Case("deep-Glob-pattern", [("Glob", {"pattern": "*/" * 33 + "*.md"})], "refused",
         TOO_DEEP),
    Case("long-Glob-pattern", [("Glob", {"pattern": "*" * 1025})], "refused", TOO_LONG),
    Case("deep-Grep-include", [("Grep", {"pattern": "x", "include": "*/" * 33 + "*.md"})],
         "refused", TOO_DEEP),
    Case("deep-Move-folder", [("Move", {"source_path": "/Projects",
                                        "destination_path": "/" + "m/" * 30 + "p"})],
         "refused", TOO_DEEP),
    # -- `..` in every path argument of every tool ------------------------------------------
    Case("dotdot-Read", [("Read", {"file_path": UP})], "refused", LEAVES),
    Case("dotdot-Read-deep", [("Read", {"file_path": "/Areas/../../../outside/x"})], "refused",
         LEAVES),
    Case("dotdot-BatchRead", [("BatchRead", {"file_patterns": [UP]})], "refused", LEAVES),
    Case("dotdot-Write", [("Write", {"file_path": "../escaped.md", "content": "x"})], "refused",
         LEAVES),
    Case("dotdot-Edit", [("Edit", {"file_path": UP, "old_string": CANARY, "new_string": "x"})],
         "refused", LEAVES),
    Case("dotdot-Edit-create",
         [("Edit", {"file_path": "../escaped.md", "old_string": "", "new_string": "x"})],
         "refused", LEAVES),
    Case("dotdot-Move-src", [("Move", {"source_path": UP, "destination_path": "/stolen.txt"})],
         "refused", LEAVES),
    Case("dotdot-Move-dst",
         [("Move", {"source_path": PLAN, "destination_path": "../../outside/plan.md"})],
         "refused", LEAVES),
    Case("dotdot-Remove", [("Remove", {"path": UP, "confirm": True})], "refused", LEAVES),
    Case("dotdot-LS", [("LS", {"path": "../.."})], "refused", LEAVES),
    Case("dotdot-Glob-path", [("Glob", {"pattern": "*", "path": "../../outside"})], "refused",
         LEAVES),
    Case("dotdot-Glob-pattern", [("Glob", {"pattern": "../../outside/*"})], "refused", "'..'"),
    Case("dotdot-Grep-path", [("Grep", {"pattern": "4242", "path": "../../outside"})],
         "refused", LEAVES),
    Case("dotdot-Grep-include", [("Grep", {"pattern": "4242", "include": "../../outside/*"})],
         "refused", "'..'"),
    # -- absolute host paths ----------------------------------------------------------------
    Case("abs-etc-passwd",
         [("Read", {"file_path": "/etc/passwd"}),
          ("Write", {"file_path": "/etc/passwd", "content": "virtual\n"})],
         "confined", check=_created_inside("etc/passwd")),
    Case("abs-host-outside", _each_tool("@OUT@/" + OUTSIDE_NAME + "_secret.txt"), "refused",
         "host filesystem path"),
    Case("abs-host-workspace",
         [("Read", {"file_path": "@WS@/_System/pkm_stats.json"}),
          ("Write", {"file_path": "@WS@/Cards/x.yaml", "content": "x"}),
          ("Read", {"file_path": "@PKM@/Areas/Health/sleep.md"}),
          ("Glob", {"pattern": "@OUT@/*"}),
          ("Grep", {"pattern": "4242", "path": "@OUT@"}),
          ("BatchRead", {"file_patterns": ["@OUT@/**"]})],
         "refused", "host filesystem path"),
    # -- symlinks planted in the fixture ----------------------------------------------------
    Case("symlink-file-out", _each_tool("/link_file.md"), "refused", OUTSIDE_LINK),
    Case("symlink-dir-out",
         [*_each_tool("/link_dir"), *_each_tool("/link_dir/" + OUTSIDE_NAME + "_secret.txt"),
          ("Write", {"file_path": "/link_dir/new.md", "content": "x"})],
         "refused", OUTSIDE_LINK),
    Case("symlink-parent-out",
         [*_each_tool("/Areas/escape/sleep.md"),
          ("Write", {"file_path": "/Areas/escape/created.md", "content": "x"})],
         "refused", OUTSIDE_LINK),
    Case("symlink-dangling-out", _each_tool("/dangling.md"), "refused", OUTSIDE_LINK),
    Case("symlink-chain-out", _each_tool("/Areas/chain/" + OUTSIDE_NAME + "_secret.txt"),
         "refused", OUTSIDE_LINK),
    Case("symlink-relative-up", _each_tool("/rel_up/" + OUTSIDE_NAME + "_secret.txt"),
         "refused", OUTSIDE_LINK),
    Case("hardlink-out",
         [("Read", {"file_path": "/Areas/hard.md"}),
          ("Write", {"file_path": "/Areas/hard.md", "content": "pwned"}),
          ("Edit", {"file_path": "/Areas/hard.md", "old_string": CANARY, "new_string": "x"}),
          ("BatchRead", {"file_patterns": ["/Areas/hard.md"]})],
         "refused", "hard links"),
    # -- bytes and lengths ------------------------------------------------------------------
    Case("nul-byte",
         [("Read", {"file_path": "/Areas/Health/sleep.md\x00.txt"}),
          ("Write", {"file_path": "/x\x00/../../escaped.md", "content": "x"}),
          ("Glob", {"pattern": "*\x00"}),
          ("Grep", {"pattern": "x", "path": "/\x00"})],
         "refused", "nul"),
    Case("control-char-newline",
         [("Write", {"file_path": "/Areas/evil\nname.md", "content": "x"})], "refused",
         "control character"),
    Case("long-name-256",
         [("Write", {"file_path": "/" + "a" * 256 + ".md", "content": "x"}),
          ("Read", {"file_path": "/Areas/" + "b" * 300})],
         "refused", "longer than 255"),
    Case("long-name-multibyte", [("Write", {"file_path": "/" + "é" * 128 + ".md",
                                            "content": "x"})], "refused", "longer than 255"),
    Case("long-path-4096", [("Write", {"file_path": "/" + "/".join(["abcd"] * 1100),
                                       "content": "x"})], "refused", TOO_LONG),
    # -- unicode lookalikes and normalisation -----------------------------------------------
    Case("unicode-one-dot-leader",
         [("Read", {"file_path": "/\u2024\u2024/\u2024\u2024/outside/x"}),
          ("Write", {"file_path": "\u2024\u2024/x.md", "content": "x"})],
         "refused", "lookalike"),
    Case("unicode-two-dot-leader", [("Write", {"file_path": "/\u2025/x.md", "content": "x"})],
         "refused", "lookalike"),
    Case("unicode-fullwidth-dots",
         [("Write", {"file_path": "/\uff0e\uff0e/x.md", "content": "x"})], "refused",
         "lookalike"),
    Case("unicode-fullwidth-solidus",
         [("Read", {"file_path": "..\uff0f..\uff0foutside\uff0fx"}),
          ("Glob", {"pattern": "..\uff0f*"})],
         "refused", "lookalike"),
    Case("unicode-division-slash",
         [("Write", {"file_path": "..\u2215..\u2215escaped.md", "content": "x"}),
          ("LS", {"path": "/Areas\u2215Health"})],
         "refused", "lookalike"),
    Case("unicode-fullwidth-backslash",
         [("Write", {"file_path": "..\uff3c..\uff3cescaped.md", "content": "x"})], "refused",
         "lookalike"),
    Case("unicode-nfd-name",
         [("Write", {"file_path": NFD_NAME, "content": "x"}),
          ("Read", {"file_path": "/Areas/café.md"})],
         "confined", check=_created_inside(NFD_NAME.lstrip("/"))),
    # -- Windows syntax and `~` -------------------------------------------------------------
    Case("windows-dotdot", _each_tool("..\\..\\outside\\x"), "refused", "windows"),
    Case("windows-drive",
         [("Read", {"file_path": "C:\\Windows\\win.ini"}),
          ("Write", {"file_path": "C:/Windows/x.md", "content": "x"}),
          ("Glob", {"pattern": "C:/*"})],
         "refused", "windows"),
    Case("windows-unc", [("Read", {"file_path": "\\\\server\\share\\x"})], "refused",
         "windows"),
    Case("tilde",
         [("Read", {"file_path": "~/.ssh/id_rsa"}),
          ("Write", {"file_path": "~root/x.md", "content": "x"}),
          ("Glob", {"pattern": "~/*"})],
         "refused", "'~'"),
    # -- globs that climb out, Grep/BatchRead outside ---------------------------------------
    Case("glob-dotdot-star", [("Glob", {"pattern": "../**"}),
                              ("BatchRead", {"file_patterns": ["../**"]})], "refused", "'..'"),
    Case("glob-deep-climb", [("Glob", {"pattern": "/**/../../*"}),
                             ("BatchRead", {"file_patterns": ["/**/../../*"]})],
         "refused", "'..'"),
    Case("glob-everything",
         [("Glob", {"pattern": "**/*"}), ("Glob", {"pattern": "**/*.txt", "path": "/"}),
          ("LS", {"path": "/", "depth": 20})],
         "confined"),
    Case("grep-everything",
         [("Grep", {"pattern": "4242"}),
          ("Grep", {"pattern": "4242", "output_mode": "content", "path": "/"}),
          ("Grep", {"pattern": ".", "output_mode": "count", "include": "**/*"})],
         "confined"),
    Case("batchread-everything",
         [("BatchRead", {"file_patterns": ["/**/*", "/link_dir/*", "/Areas/escape/*",
                                           "/Areas/*.md"]})],
         "confined"),
    # -- agent state through PKM tools ------------------------------------------------------
    Case("system-facts-cards",
         [("Read", {"file_path": "../_System/pkm_stats.json"}),
          ("Write", {"file_path": "/../Cards/2026/03/14_ts_2.yaml", "content": "x"}),
          ("Edit", {"file_path": "../Facts/2026/03/14.md", "old_string": "", "new_string": "x"}),
          ("LS", {"path": "/.."})],
         "refused", LEAVES),
    Case("system-as-virtual",
         [("Read", {"file_path": "/_System/pkm_stats.json"}),
          ("Read", {"file_path": "/Cards/2026/03/14_ts_2.yaml"})],
         "refused", "does not exist"),
    # -- the PKM root -----------------------------------------------------------------------
    Case("root-move",
         [("Move", {"source_path": "/", "destination_path": "/x"}),
          ("Move", {"source_path": ".", "destination_path": "/y"}),
          ("Move", {"source_path": "/Areas", "destination_path": "/", "overwrite": True})],
         "refused", "root"),
    Case("root-remove",
         [("Remove", {"path": "/", "confirm": True}), ("Remove", {"path": ".", "confirm": True}),
          ("Remove", {"path": "/Areas/..", "confirm": True}),
          ("Remove", {"path": "", "confirm": True})],
         "refused", "root"),
    # -- TOCTOU: a symlink swapped in after validation --------------------------------------
    Case("toctou-read-parent", [("Read", {"file_path": "/Areas/Health/sleep.md"})], "refused",
         LINK_REFUSED, swap="parent"),
    Case("toctou-read-final", [("Read", {"file_path": "/Areas/Health/sleep.md"})], "refused",
         LINK_REFUSED, swap="final"),
    Case("toctou-write-parent",
         [("Write", {"file_path": "/Areas/Health/sleep.md", "content": "pwned"})], "refused",
         LINK_REFUSED, swap="parent"),
    Case("toctou-write-new-file",
         [("Write", {"file_path": "/Areas/Health/new.md", "content": "pwned"})], "refused",
         LINK_REFUSED, swap="parent"),
    Case("toctou-write-final",
         [("Write", {"file_path": "/Areas/Health/sleep.md", "content": "pwned"})], "refused",
         LINK_REFUSED, swap="final"),
    Case("toctou-edit-parent",
         [("Edit", {"file_path": "/Areas/Health/sleep.md", "old_string": "# Sleep",
                    "new_string": "pwned"})],
         "refused", LINK_REFUSED, swap="parent"),
    Case("toctou-remove-parent", [("Remove", {"path": "/Areas/Health/sleep.md",
                                              "confirm": True})],
         "refused", LINK_REFUSED, swap="parent"),
    Case("toctou-move-dst-parent",
         [("Move", {"source_path": PLAN, "destination_path": "/Areas/Health/plan.md"})],
         "refused", LINK_REFUSED, swap="parent", hook_call=2),
    Case("toctou-batchread-parent",
         [("BatchRead", {"file_patterns": ["/Areas/Health/sleep.md"]})], "refused",
         LINK_REFUSED, swap="parent"),
    Case("toctou-read-before-io", [("Read", {"file_path": "/Areas/Health/sleep.md"})],
         "refused", LINK_REFUSED, swap="parent", hook="read_bytes"),
    Case("toctou-write-before-io",
         [("Write", {"file_path": "/Areas/Health/sleep.md", "content": "pwned"})], "refused",
         LINK_REFUSED, swap="parent", hook="write_bytes"),
    Case("toctou-move-before-io",
         [("Move", {"source_path": PLAN, "destination_path": "/Areas/Health/plan.md"})],
         "refused", LINK_REFUSED, swap="parent", hook="rename"),
    Case("toctou-remove-before-io",
         [("Remove", {"path": "/Areas/Health/sleep.md", "confirm": True})], "refused",
         LINK_REFUSED, swap="parent", hook="remove"),
    # a file swapped for a link is removed as the link: the target outside stays
    Case("toctou-remove-final-before-io",
         [("Remove", {"path": "/Areas/Health/sleep.md", "confirm": True})], "confined",
         swap="final", hook="remove"),
    Case("toctou-grep-walk",
         [("Grep", {"pattern": "4242", "output_mode": "content"})], "confined",
         swap="parent", hook="list_dir", hook_call=3),
    Case("toctou-grep-read",
         [("Grep", {"pattern": "4242", "output_mode": "content"})], "confined",
         swap="parent", hook="read_bytes"),
    Case("toctou-ls-walk", [("LS", {"path": "/", "depth": 10})], "confined", swap="parent",
         hook="list_dir", hook_call=2),
]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    ws, outside = _plant(tmp_path)
    return Env(tmp_path, ws, outside, make_session(ws))


def _host_markers(env: Env) -> list[str]:
    paths = {str(env.tmp), os.path.realpath(env.tmp), str(env.ws.pkm), os.path.realpath(env.ws.pkm)}
    return sorted(paths)


def test_corpus_size() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
    assert sum(len(c.calls) for c in CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_attack(case: Case, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # make_session (in the fixture) prepared Facts/ and Cards/: they are part of "outside"
    before = _state(env.tmp, env.ws.pkm)
    _install_hook(monkeypatch, env, case)
    markers = _host_markers(env)
    for tool, raw_args in case.calls:
        args = env.fill(raw_args)
        result = await invoke(env.session, tool, **args)
        label = f"{case.id}: {tool}({str(args)[:160]})"
        # escapes: outside content or names, host paths
        assert CANARY not in result.content, f"{label} read outside PKM/: {result.content[:300]}"
        if OUTSIDE_NAME not in str(args):  # an error may echo the (virtual) path it was given
            assert OUTSIDE_NAME not in result.content, f"{label} listed outside PKM/"
        for marker in markers:
            assert marker not in result.content, f"{label} leaked the host path {marker}"
        # the expected verdict
        if case.expect == "refused":
            assert result.is_error, f"{label} was not refused: {result.content[:300]}"
            assert case.reason.lower() in result.content.lower(), f"{label}: {result.content}"
    after = _state(env.tmp, env.ws.pkm)
    assert after == before, f"{case.id} changed something outside PKM/: " + ", ".join(
        sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    )
    assert env.swapped == (case.swap is not None), f"{case.id}: the TOCTOU hook did not run"
    if case.check is not None:
        case.check(env)
