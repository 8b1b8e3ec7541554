"""Packaging glue that pyproject.toml cannot express: the data folders at the top of the
repository (prompts/, tasks/, manuals/, fixtures/) go into the wheel as package data of
`promptloop.agents.data`, whose `data_dir` finds them there (and in the repository when run from source).
Everything else about the project is in pyproject.toml."""

from setuptools import find_packages, setup

DATA_FOLDERS = ("prompts", "tasks", "manuals", "fixtures")
DATA = {f"promptloop.agents.data.{name}": name for name in DATA_FOLDERS}

setup(
    packages=[*find_packages(include=["promptloop", "promptloop.*"]), *DATA],
    package_dir=DATA,
    package_data={
        "promptloop.optimizer.report.html": ["templates/*.j2", "static/*.css", "static/*.js"],
        "promptloop.optimizer.report.schemas": ["*.json"],
        "promptloop.optimizer.adapters": ["schema/*.json"],
        "promptloop.optimizer.core": ["default_project.toml"],
        "promptloop.optimizer.init_template": ["promptloop.toml", "example_agent/*", "evals/**/*.json"],
        "promptloop.optimizer.view": ["templates/*.j2", "static/*.css", "static/*.js"],
        **{package: ["**/*", "**/.*"] for package in DATA},
    },
    include_package_data=False,
)
