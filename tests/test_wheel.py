"""An installed wheel works without the repository: build it, install it into a fresh virtual
environment, and run `promptloop suites` and a live eval (against a loopback OpenAI-compatible
server) from a folder that is not the repository.

Building needs setuptools from the package index (pip's build isolation): when the index cannot
be reached, the test is skipped with pip's message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.cli_json import cli_result
from tests.llm.agent_server import AgentServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("promptloop", "prompts", "tasks", "manuals", "fixtures")
FILES = ("setup.py", "pyproject.toml", "README.md")
_OFFLINE = ("No matching distribution found", "Could not find a version that satisfies")


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def _build_wheel(tmp: Path) -> Path:
    """A copy of the project's sources (no checkout state, no caches) built into a wheel."""
    src = tmp / "src"
    for name in SOURCES:
        shutil.copytree(ROOT / name, src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".promptloop"))
    for name in FILES:
        shutil.copy2(ROOT / name, src / name)
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
                 tmp / "dist", src, cwd=tmp)
    if built.returncode and any(m in built.stdout + built.stderr for m in _OFFLINE):
        pytest.skip(f"cannot fetch the build requirements: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("promptloop-*.whl")
    return wheel


def _install(wheel: Path, tmp: Path) -> Path:
    """A new venv holding only the wheel; its dependencies come from this interpreter's
    site-packages through a .pth line (whose own .pth files, like an editable install's
    finder, are not processed)."""
    venv = tmp / "venv"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                   cwd=tmp).stdout.strip()
    (Path(purelib) / "_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
                     "--no-deps", "--no-index", wheel, cwd=tmp)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def test_installed_wheel_lists_suites_and_runs_an_eval(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as built:
        top = {name.split("/")[0] for name in built.namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"promptloop"}, top
    venv = _install(wheel, tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMPTLOOP_", "PYTHON"))}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path)

    where = _run(venv / "bin" / "python", "-c",
                 "import promptloop.agents as agents; "
                 "from promptloop.agents.data import data_dir; "
                 "print(agents.__file__); print(data_dir('tasks'))", cwd=work, env=env)
    assert where.returncode == 0, where.stderr
    code_file, tasks = where.stdout.split()
    assert Path(code_file).is_relative_to(venv) and Path(tasks).is_relative_to(venv)

    # one import package: the names `agents` (the OpenAI Agents SDK's), `graders` and
    # `optimizer` stay free for other packages
    for name in ("agents", "graders", "optimizer"):
        taken = _run(venv / "bin" / "python", "-c", f"import {name}", cwd=work, env=env)
        assert taken.returncode != 0 and "No module named" in taken.stderr, name
    version = _run(venv / "bin" / "promptloop", "--version", cwd=work, env=env)
    assert version.returncode == 0 and "promptloop" in version.stdout, version.stderr

    listed = _run(venv / "bin" / "promptloop", "suites", "--json", cwd=work, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    suites = {(s["agent"], s["kind"]): s for s in cli_result(listed.stdout)}
    assert ("card_agent", "regression") in suites and ("pkm_agent", "capability") in suites
    assert all(Path(s["path"]).is_relative_to(venv) for s in suites.values())

    key = ("card_agent", "regression")
    with AgentServer() as api:
        ran = _run(venv / "bin" / "promptloop", "eval", "--suite", "card_agent", "--kind",
                   "regression", "--agent-model", "openai:fake", "--base-url",
                   f"{api.url}/v1", "--trials", "1", "--out", work / "state", "--json",
                   cwd=work, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    data = cli_result(ran.stdout)
    summary = data["summary"]
    assert sorted(data["sources"]) == [
        "prompt: prompts/card_agent.md @ promptloop's bundled copy (no git repository here)",
        "tasks: tasks/card_agent/regression @ promptloop's bundled copy (no git repository here)",
    ]
    assert summary["num_trials"] == summary["counted_trials"] == suites[key]["tasks"]
    assert summary["passed_trials"] > 0
    assert not (work / ".promptloop").exists() and (work / "state").is_dir()
