"""Shared configuration: defaults, `promptloop.toml`, state directory and model construction."""

from __future__ import annotations

import difflib
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from agents.llm.errors import ModelConfigError
from agents.llm.registry import ModelOptions, create_client, parse_model_id
from agents.llm.types import ModelClient
from optimizer.core.results import Provenance

DEFAULT_AGENT_MODEL = "local:smollm2"
CONFIG_FILE = "promptloop.toml"

# A judge should be a different, stronger model than the agent (SPEC section 5).
_DEFAULT_JUDGES = {
    "anthropic": ("anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-1"),
    "openai": ("openai:gpt-4.1", "openai:o3"),
    "local": ("local:smollm2",),  # the only offline model: the judge cannot differ
    "scripted": ("scripted:judge",),
}


class ConfigError(Exception):
    """A user configuration problem (exit code 1)."""


def did_you_mean(value: str, options: list[str]) -> str:
    hint = difflib.get_close_matches(value, options, n=1)
    return f" Did you mean '{hint[0]}'?" if hint else ""


def default_judge(agent_model: str) -> str:
    """A judge of the agent's provider that is not the agent itself where one exists."""
    provider, _ = parse_model_id(agent_model)
    choices = _DEFAULT_JUDGES.get(provider, (agent_model,))
    return next((c for c in choices if c != agent_model), choices[0])


def load_toml(path: Path | None) -> dict[str, Any]:
    """Read `promptloop.toml` (explicit path, or the one in the current directory if present)."""
    candidate = path or Path(CONFIG_FILE)
    if not candidate.is_file():
        if path is not None:
            raise ConfigError(f"{path}: config file not found")
        return {}
    try:
        return tomllib.loads(candidate.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{candidate}: invalid TOML: {err}") from err


def repo_root(start: Path | None = None) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=start or Path.cwd(),
            capture_output=True,
            text=True,
            check=True,
        )
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return Path(out.stdout.strip())


def state_dir(explicit: Path | None = None) -> Path:
    """Where runs, caches and ledgers live: --state-dir, $PROMPTLOOP_HOME, or <repo>/.promptloop.

    The folder is added to the repository's `.git/info/exclude` so it never shows up as an
    untracked change in the user's checkout.
    """
    if explicit is not None:
        return explicit
    env = os.environ.get("PROMPTLOOP_HOME")
    if env:
        return Path(env)
    root = repo_root()
    if root is None:
        return Path.cwd() / ".promptloop"
    _exclude(root, ".promptloop/")
    return root / ".promptloop"


def _exclude(root: Path, pattern: str) -> None:
    try:
        common = subprocess.run(
            ["git", "rev-parse", "--git-common-dir"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        exclude = (root / common / "info" / "exclude").resolve()
        text = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
        if pattern not in text.splitlines():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text(
                text + ("" if text.endswith("\n") or not text else "\n") + pattern + "\n",
                encoding="utf-8",
            )
    except (subprocess.CalledProcessError, OSError):
        pass  # best effort: an unwritable .git only means the folder shows as untracked


def make_client(
    model_id: str, base_url: str | None = None, timeout_s: float = 120.0, max_retries: int = 4
) -> ModelClient:
    """A client for `model_id`. `base_url` (--base-url) is the OpenAI-compatible server, so it
    only applies to `openai:` ids; Anthropic reads ANTHROPIC_BASE_URL itself."""
    try:
        provider, _ = parse_model_id(model_id)
        url = base_url if provider == "openai" else None
        return create_client(
            model_id, ModelOptions(base_url=url, timeout_s=timeout_s, max_retries=max_retries)
        )
    except ModelConfigError as err:
        raise ConfigError(str(err)) from err


def provenance(root: Path | None = None) -> Provenance:
    root = root or repo_root()
    if root is None:
        return Provenance()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except subprocess.CalledProcessError:
        return Provenance()
    return Provenance(git_commit=commit, git_dirty=dirty)
