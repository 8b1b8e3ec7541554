"""Reading suite.json and task.json files: size limits, JSON errors that name the file and the
place, unknown-key warnings, and the original's stringification of metadata values.

Size limits (ours; the original has none, but a 50 MB string must not load for minutes and then
reach a model): a file larger than `MAX_JSON_BYTES` is refused before it is read, and a string
value longer than `MAX_STRING_CHARS` characters is refused with its field named. A real fact
entry is a few hundred characters; the limit is two orders of magnitude above that.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from promptloop.optimizer.core.names import did_you_mean

_KEYED = re.compile(r"^([a-z_][a-z0-9_.]*): (.+)$", re.S)
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_STRING_CHARS = 100_000


class SuiteError(Exception):
    """A suite or task file is invalid. The message names the file and the field."""


def read_json_object(path: Path) -> tuple[dict[str, Any], bytes]:
    """The JSON object in `path` and the file's bytes; every problem is a SuiteError naming the
    file and the place (line and column, or the field)."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise SuiteError(
                f"{path}: field '(file)': {size / 2**20:.1f} MiB is over the limit of "
                f"{MAX_JSON_BYTES // 2**20} MiB for a suite or task file"
            )
        raw = path.read_bytes()
    except OSError as err:
        raise SuiteError(f"{path}: cannot read ({err.strerror})") from err
    if raw.startswith(b"\xef\xbb\xbf"):
        raise SuiteError(f"{path}: starts with a byte order mark; save it as UTF-8 without one")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise SuiteError(f"{path}: not UTF-8 text (byte {err.start}, line {line})") from err
    except json.JSONDecodeError as err:
        raise SuiteError(
            f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from err
    except RecursionError as err:
        raise SuiteError(f"{path}: field '(root)': JSON nested too deeply to read") from err
    if not isinstance(data, dict):
        raise SuiteError(
            f"{path}: field '(root)': must hold a JSON object, not a {_json_type(data)}"
        )
    for where, text in _strings(data, ""):
        if len(text) > MAX_STRING_CHARS:
            raise SuiteError(
                f"{path}: field '{where}': {len(text)} characters, over the limit of "
                f"{MAX_STRING_CHARS} for one string"
            )
    return data, raw


def read_json_line(path: Path, line: int, raw: bytes) -> tuple[dict[str, Any], bytes]:
    """The JSON object on line `line` of a JSONL suite file; problems name the file and line."""
    where = f"{path} line {line}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise SuiteError(f"{where}: not UTF-8 text (column {err.start + 1})") from err
    except json.JSONDecodeError as err:
        raise SuiteError(f"{where}: invalid JSON at column {err.colno}: {err.msg} (one task "
                         "object per line)") from err
    except RecursionError as err:
        raise SuiteError(f"{where}: JSON nested too deeply to read") from err
    if not isinstance(data, dict):
        raise SuiteError(f"{where}: must hold a JSON object, not a {_json_type(data)}")
    for field, text in _strings(data, ""):
        if len(text) > MAX_STRING_CHARS:
            raise SuiteError(f"{where}: field '{field}': {len(text)} characters, over the limit "
                             f"of {MAX_STRING_CHARS} for one string")
    return data, raw


def _json_type(value: Any) -> str:
    names = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string (keys included) in a parsed JSON value, with its dotted field path."""
    if isinstance(value, str):
        yield where or "(root)", value
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{where}.{key}" if where else key
            yield where or "(root)", key
            yield from _strings(item, child)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}.{i}" if where else str(i))


def format_validation(path: Path | str, err: ValidationError, prefix: str = "") -> str:
    """A pydantic error as `file: field 'x.y': problem; field ...` (one line)."""
    parts = []
    for e in err.errors():
        loc = prefix + ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        named = _KEYED.match(msg)  # a whole-object rule names its key: "description: ..."
        if named and not e["loc"]:
            loc, msg = prefix + named[1], named[2]
        parts.append(f"field '{loc or '(root)'}': {msg}")
    return f"{path}: " + "; ".join(parts)


# --- lenient reading: what the original ignores or converts ----------------------------------


def known_keys(model: type[BaseModel]) -> set[str]:
    """The keys a model reads: field names and their aliases."""
    fields = model.model_fields
    return set(fields) | {f.alias for f in fields.values() if f.alias}


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()


def unknown_key_warnings(
    path: Path | str, data: Mapping[str, Any], model: type[BaseModel], where: str = "",
    also: Iterable[str] = (),
) -> list[str]:
    """One warning per key of `data` that `model` does not read (the original ignores them)."""
    known = known_keys(model) | set(also)
    out = []
    for key in data:
        if key in known:
            continue
        snake = _snake(key)
        hint = f" Did you mean '{snake}'?" if snake in known else did_you_mean(key, known)
        out.append(f"{path}: field '{where}{key}': unknown key, ignored.{hint}")
    return out


def dart_string(value: Any) -> str:
    """`value.toString()` as the original (Dart) writes a JSON value: true, null, 3, 3.0,
    [a, b], {k: v}."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value).replace("e-0", "e-").replace("e+0", "e+")
    if isinstance(value, list):
        return "[" + ", ".join(dart_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {dart_string(v)}" for k, v in value.items()) + "}"
    return str(value)


def whole_number(value: Any) -> Any:
    """`trials_per_run` coerced to int as the original does: numbers are truncated (Dart's
    `toInt`), numeric strings are parsed; anything else is left for the type error."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"must be a whole number, not {value[:40]!r}") from None
        if math.isfinite(number):
            return int(number)
    return value


def drop_nulls(data: Any, optional: Iterable[str]) -> Any:
    """`key: null` read as a missing key for the optional fields (the original's `?? default`)."""
    if not isinstance(data, dict):
        return data
    skip = set(optional)
    return {k: v for k, v in data.items() if not (v is None and k in skip)}
