"""The trial contract: its JSON Schema files are what the models generate, and documents read
as the contract says."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from promptloop.optimizer.adapters.contract import (
    CONTRACT,
    DOCS_SCHEMA,
    SCHEMA_FILE,
    TrialRequest,
    TrialResultDoc,
    schema_document,
    schema_text,
)
from promptloop.optimizer.adapters.spec import parse_settings
from tests.optimizer.adapters.fakes import World

ROOT = Path(__file__).resolve().parents[3]
REGENERATE = "run `python -m optimizer.adapters.contract` to rewrite it"


@pytest.mark.parametrize("path", [SCHEMA_FILE, ROOT / DOCS_SCHEMA], ids=["package", "docs"])
def test_schema_files_are_what_the_models_generate(path: Path) -> None:
    assert path.exists(), f"{path} is missing: {REGENERATE}"
    assert path.read_text(encoding="utf-8") == schema_text(), f"{path} is stale: {REGENERATE}"


def test_the_schema_ships_in_the_package() -> None:
    setup = (ROOT / "setup.py").read_text()
    assert '"promptloop.optimizer.adapters": ["schema/*.json"]' in setup
    assert SCHEMA_FILE.parent.name == "schema" and SCHEMA_FILE.parent.parent.name == "adapters"


def test_documents_validate_against_the_schema(tmp_path: Path) -> None:
    schema = schema_document()
    jsonschema.Draft202012Validator.check_schema(schema)
    request = World.make(tmp_path).request().model_dump(mode="json")
    result = {"contract": CONTRACT, "outcome": {"items": []},
              "transcript": [{"role": "assistant", "content": "hi",
                              "tool_calls": [{"name": "x", "arguments": {"a": 1}}]}],
              "usage": {"input_tokens": 3, "output_tokens": 4},
              "error": {"cause": "agent", "message": "gave up"}}
    for doc, name in ((request, "TrialRequest"), (result, "TrialResultDoc")):
        jsonschema.validate(doc, {**schema, "$ref": f"#/$defs/{name}"})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"transcript": []}, {**schema, "$ref": "#/$defs/TrialResultDoc"})


def test_request_round_trips_and_refuses_unknown_keys(tmp_path: Path) -> None:
    request = World.make(tmp_path).request(index=2)
    back = TrialRequest.model_validate_json(request.model_dump_json())
    assert back == request and back.contract == CONTRACT and back.task_id == "t1"
    with pytest.raises(ValidationError):
        TrialRequest.model_validate({**request.model_dump(), "surprise": 1})


def test_result_is_read_leniently_but_outcome_is_required() -> None:
    doc = TrialResultDoc.model_validate({"outcome": {"a": 1}, "later_field": True})
    assert doc.contract == CONTRACT and doc.error is None and doc.transcript == []
    with pytest.raises(ValidationError, match="outcome"):
        TrialResultDoc.model_validate({"contract": CONTRACT})
    with pytest.raises(ValidationError, match="cause"):
        TrialResultDoc.model_validate({"outcome": {}, "error": {"cause": "weather"}})


def test_adapter_spec_refuses_unknown_keys_and_incomplete_adapters() -> None:
    assert parse_settings({"adapter": "command", "command": ["x"]}).max_output_bytes == \
        10 * 1024 * 1024
    with pytest.raises(ValidationError, match="extra"):
        parse_settings({"adapter": "command", "command": ["x"], "comand": ["y"]})
    for bad, needs in (({"adapter": "worker"}, "command"), ({"adapter": "http"}, "url"),
                       ({"adapter": "python", "entry": "nocolon"}, "entry"),
                       ({"adapter": "http", "url": "ftp://x"}, "url"),
                       ({"adapter": "command", "command": ["x"], "timeout": "300"}, "timeout")):
        with pytest.raises(ValidationError, match=needs):
            parse_settings(bad)
    assert json.loads(schema_text())["$defs"]["TrialRequest"]["additionalProperties"] is False
