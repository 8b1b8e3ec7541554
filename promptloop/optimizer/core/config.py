"""Shared configuration: defaults, `promptloop.toml` and where the state folder is.

Precedence of settings (flag > env var > promptloop.toml > default) is implemented once, in the
CLI (`optimizer/cli/common.py`); this module only reads the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from promptloop.agents.llm.registry import parse_model_id

DEFAULT_AGENT_MODEL = "local:smollm2"
CONFIG_FILE = "promptloop.toml"
STATE_FOLDER = ".promptloop"
"""The state folder's name at the repository root (the one place this literal is written)."""
STATE_ENV = "PROMPTLOOP_HOME"

# A judge should be a different, stronger model than the agent (docs/compat.md).
_DEFAULT_JUDGES = {
    "anthropic": ("anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-1"),
    "openai": ("openai:gpt-4.1", "openai:o3"),
    "local": ("local:smollm2",),  # the only offline model: the judge cannot differ
    "scripted": ("scripted:judge",),
}


class ConfigError(Exception):
    """A user configuration problem (exit code 1)."""


def state_folder(root: Path | None, explicit: Path | None = None) -> Path:
    """The one resolver of the state folder, without side effects: `explicit` (--state-dir),
    else $PROMPTLOOP_HOME, else <root>/.promptloop (the current folder outside a repository).
    `git.state_dir` adds the folder to the repository's exclude file on top."""
    if explicit is not None:
        return explicit
    env = os.environ.get(STATE_ENV)
    if env:
        return Path(env)
    return (root or Path.cwd()) / STATE_FOLDER


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


