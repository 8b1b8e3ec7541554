"""Packaging glue that pyproject.toml cannot express: the data folders at the top of the
repository (prompts/, tasks/, manuals/, fixtures/) go into the wheel as package data of
`agents.data`, whose `data_dir` finds them there (and in the repository when run from source).
Everything else about the project is in pyproject.toml."""

from setuptools import find_packages, setup

DATA_FOLDERS = ("prompts", "tasks", "manuals", "fixtures")
DATA = {f"agents.data.{name}": name for name in DATA_FOLDERS}

setup(
    packages=[*find_packages(include=["agents*", "graders*", "optimizer*"]), *DATA],
    package_dir=DATA,
    package_data={
        "optimizer.report.html": ["templates/*.j2", "static/*.css", "static/*.js"],
        "optimizer.report.schemas": ["*.json"],
        "optimizer.adapters": ["schema/*.json"],
        "optimizer.core": ["default_project.toml"],
        "optimizer.init_template": ["promptloop.toml", "example_agent/*", "evals/**/*.json"],
        "optimizer.view": ["templates/*.j2", "static/*.css", "static/*.js"],
        **{package: ["**/*", "**/.*"] for package in DATA},
    },
    include_package_data=False,
)
