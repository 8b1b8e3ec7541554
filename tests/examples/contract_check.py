"""Checks a document against the trial contract's shipped JSON Schema and pydantic models."""

from __future__ import annotations

import json
from typing import Any

from promptloop.optimizer.adapters.contract import TrialRequest, TrialResultDoc

SCHEMA_FILE = "trial-v1.schema.json"


def _schema(definition: str) -> dict[str, Any]:
    from importlib.resources import files

    whole = json.loads(files("promptloop.optimizer.adapters").joinpath("schema", SCHEMA_FILE)
                       .read_text())
    return {"$defs": whole["$defs"], "$ref": f"#/$defs/{definition}"}


def check_result(doc: dict[str, Any]) -> None:
    """`doc` is a valid result document (JSON Schema and model)."""
    import jsonschema

    jsonschema.validate(doc, _schema("TrialResultDoc"))
    TrialResultDoc.model_validate(doc)


def check_request(doc: dict[str, Any]) -> None:
    import jsonschema

    jsonschema.validate(doc, _schema("TrialRequest"))
    TrialRequest.model_validate(doc)
