"""The data folders the code reads at run time: `prompts/`, `tasks/`, `manuals/`, `fixtures/`.

In a source checkout (and an editable install) they are the folders at the top of the
repository. A wheel carries them as package data of this package (`agents/data/<folder>/`, see
setup.py), so an installed promptloop finds its prompts, suites and fixtures without the
repository. `data_dir` is the one place that knows which.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

DataFolder = Literal["prompts", "tasks", "manuals", "fixtures"]
DATA_FOLDERS: tuple[DataFolder, ...] = ("prompts", "tasks", "manuals", "fixtures")
_SOURCE_ROOT = Path(__file__).resolve().parents[3]
"""The repository top when this package runs from a source checkout."""


def data_dir(name: DataFolder) -> Path:
    """The folder `name` as shipped with this promptloop: the package data of an installed
    wheel, else the repository folder of a source checkout."""
    if name not in DATA_FOLDERS:
        raise ValueError(f"unknown data folder {name!r}; known: {', '.join(DATA_FOLDERS)}")
    packaged = Path(str(resources.files(__name__) / name))
    if packaged.is_dir():
        return packaged
    source = _SOURCE_ROOT / name
    if not source.is_dir():
        raise FileNotFoundError(
            f"promptloop's {name}/ folder is missing: neither {packaged} nor {source} exists "
            "(reinstall promptloop)"
        )
    return source


__all__ = ["DATA_FOLDERS", "DataFolder", "data_dir"]
