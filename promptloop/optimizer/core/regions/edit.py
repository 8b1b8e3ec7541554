"""Finding any region and writing new content into it: `locate` (a literal by its variable,
markers, or the whole file), `check_literal`, `splice` and `edited_region_text`. Pure: no
I/O."""

from __future__ import annotations

import json
import tomllib

from promptloop.optimizer.core.regions.literal import check_in_literal, lines_of, locate_literal
from promptloop.optimizer.core.regions.markers import locate_markers
from promptloop.optimizer.core.regions.model import (
    Region,
    RegionError,
    RegionSpec,
    broken,
    language_of,
    lines_at,
    region_line,
)


def locate(spec: RegionSpec, file_text: str) -> Region:
    """The region `spec` names in `file_text`; RegionError when it is not found, is found
    twice, is not one supported literal, or its literal is unterminated."""
    lang = language_of(spec.path)
    if spec.kind == "literal":
        return locate_literal(spec, file_text, lang)
    if spec.kind == "markers":
        return locate_markers(spec, file_text, lang)
    first, last = lines_of(file_text, 0, len(file_text))
    return Region(spec, 0, len(file_text), first, last, file_text, "", "", lang)




def check_literal(region: Region, new_text: str) -> None:
    """BreaksLiteralError (a RegionError saying what is wrong and naming the region) when
    `new_text`, in source form, would break the region for its host language, or would change
    a line outside it."""
    if region.kind == "file":
        return
    if region.kind == "markers":
        assert region.spec.begin is not None and region.spec.end is not None
        for what, marker in (("begin", region.spec.begin), ("end", region.spec.end)):
            if marker in new_text:
                line = region_line(new_text, new_text.find(marker))
                raise broken(region, f"it contains the {what} marker {marker!r} (region "
                              f"line {line})", line)
        if region.enclosing is not None:
            quote, _, raw, fstring = region.enclosing
            check_in_literal(region, new_text, quote, raw, fstring)
        if region.indent:
            for n, text in enumerate(new_text.split("\n"), 1):
                if text.strip() and not text.startswith(region.indent):
                    raise broken(region, f"{lines_at(region, n)} is not indented by the "
                                 f"block's {len(region.indent)} space(s), which would end the "
                                 "YAML block there; indent every line like the block", n)
    else:
        check_in_literal(region, new_text, region.closer, region.raw, region.fstring)
    ends_line = region.text.endswith("\n") or region.kind == "markers"
    if ends_line and new_text and not new_text.endswith("\n"):
        after = "end marker" if region.kind == "markers" else f"closing {region.closer!r}"
        raise broken(region, f"it drops the line break before the {after}, which would join "
                      f"the {after} to the region's last line and change file line "
                      f"{region.end_line + 1} outside the region; keep the final line break",
                      region_line(new_text, len(new_text)))


def splice(spec: RegionSpec, file_text: str, new_text: str) -> str:
    """`file_text` with only the region's content replaced by `new_text` (source form).
    RegionError when the region is not found or `new_text` would break it."""
    region = locate(spec, file_text)
    check_literal(region, new_text)
    out = file_text[:region.start] + new_text + file_text[region.end:]
    again = locate(spec, out)
    if again.start != region.start or again.text != new_text:
        raise broken(region, "after the change the region no longer ends where the new text "
                      "does")
    check_host(region, file_text, out)
    return out


def _parse_error(path: str, text: str) -> tuple[str, str] | None:
    """(format, first line of the parser's error) when `text` does not parse as the data
    format `path`'s suffix names (YAML, JSON, TOML); None when it parses or is no such file."""
    suffix = path.lower().rsplit(".", 1)[-1] if "." in path else ""
    try:
        if suffix in ("yaml", "yml"):
            import yaml

            list(yaml.safe_load_all(text))
            return None
        if suffix == "json":
            json.loads(text)
            return None
        if suffix == "toml":
            tomllib.loads(text)
            return None
    except Exception as err:  # each parser's own error type
        name = {"yml": "YAML", "yaml": "YAML"}.get(suffix, suffix.upper())
        return name, " ".join(str(err).split())[:200]
    return None


def check_host(region: Region, old_file: str, new_file: str) -> None:
    """BreaksLiteralError when the file parsed (YAML, JSON or TOML) before the change and
    does not after it: a prompt inside a config file must leave the file readable."""
    if _parse_error(region.path, old_file) is not None:
        return  # it did not parse before either (a template, several documents...)
    failed = _parse_error(region.path, new_file)
    if failed is not None:
        fmt, why = failed
        raise broken(region, f"the file would no longer parse as {fmt} ({why})")


def edited_region_text(spec: RegionSpec, old_file: str, new_file: str) -> str:
    """The region's new text when `new_file` is `old_file` with only the region's content
    changed (an external proposer edits the whole file). RegionError when anything outside
    changed; BreaksLiteralError when the new content would break the literal."""
    old = locate(spec, old_file)
    prefix, suffix = old_file[:old.start], old_file[old.end:]
    if (len(new_file) < len(prefix) + len(suffix) or not new_file.startswith(prefix)
            or not new_file.endswith(suffix)):
        raise RegionError(f"the edit changes {spec.path} outside {old.describe()}; only the "
                          "region's text may change")
    new_text = new_file[len(prefix):len(new_file) - len(suffix)]
    splice(spec, old_file, new_text)
    return new_text
