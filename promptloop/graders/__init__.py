"""Graders: score types, the registry by name, and the card, PKM and judge graders."""

from promptloop.graders.base import JUDGE_SETTINGS, Assertion, GradeContext, GraderConfig, Score
from promptloop.graders.registry import (
    GraderConfigError,
    GraderError,
    GraderSpec,
    UnknownGraderError,
    config_warnings,
    get_grader,
    known_graders,
    run_grader,
    trial_passed,
    validate_config,
)

__all__ = [
    "JUDGE_SETTINGS",
    "Assertion",
    "GradeContext",
    "GraderConfig",
    "GraderConfigError",
    "GraderError",
    "GraderSpec",
    "Score",
    "UnknownGraderError",
    "config_warnings",
    "get_grader",
    "known_graders",
    "run_grader",
    "trial_passed",
    "validate_config",
]
