"""Secrets promptloop knows never reach what it writes or prints, in the forms a team found
getting through (a key sharing its first characters with another, spaced, split, hex, upper
case), nor through a proposer's hypothesis, the terminal or the --json envelope."""

from __future__ import annotations

import io
import json
import urllib.parse

import pytest

from promptloop.agents.llm.errors import CredentialsError
from promptloop.agents.secrets import FROM_DOTENV, scrub

KEY = "sk-test-Zq81XpL4mN7vR2tY9wK3bH6jD0fG5sA1cE8uI"
OPENAI_FILE = "sk-test-DotEnvOpenAiKeyPp4Rr8Ss2Tt6Uu0Vv3Ww7Xx"
MISTRAL_FILE = "sk-test-DotEnvMistralKeyHh7Ii8Jj9Kk0Ll1Mm2"


def test_a_key_sharing_its_first_characters_with_another_is_removed_whole() -> None:
    """Two keys of one provider share their first 12 characters: the first key's prefix rule
    used to cut the second one's start and leave its body ("***nvMistralKeyHh7...")."""
    got = scrub(f"a {MISTRAL_FILE} b {OPENAI_FILE} c", (OPENAI_FILE, MISTRAL_FILE))
    assert got == "a *** b *** c"


@pytest.mark.parametrize("form", [
    KEY.replace("-", " "),                      # spaced
    json.dumps([KEY[:8], KEY[8:]]),             # split across strings
    KEY[:20] + " " + KEY[20:],                  # cut in halves
    KEY.encode().hex(),                         # hex
    KEY.upper(),                                # upper case
    urllib.parse.quote(KEY, safe="").replace("-", "%2D"),  # over-encoded URL
    " ".join(KEY),                              # a blank between every character
    "".join(f"%{b:02X}" for b in KEY.encode()),  # every byte percent-encoded
])
def test_the_body_of_a_key_does_not_survive_in_any_simple_form(form: str) -> None:
    got = scrub(f"outcome: {form} end", (KEY,))
    body = KEY[8:]
    assert body not in got and body.upper() not in got, got
    assert not any(body[i:i + 12] in got for i in range(len(body) - 11)), got
    assert got.startswith("outcome: ") and got.endswith(" end")


def test_ordinary_text_is_left_alone() -> None:
    text = "sk-test- is a prefix; lorem ipsum dolor sit amet, 0123456789 abcdef"
    assert scrub(text, (KEY,)) == text


def test_a_hypothesis_never_carries_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hypothesis becomes the branch's commit subject, the PR body and the output."""
    from promptloop.optimizer.propose.proposer import Proposal

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    p = Proposal(hypothesis=f"Use credentials {KEY} to call the API.", diff="", raw_reply="",
                 attempts=1)
    assert p.hypothesis == "Use credentials *** to call the API."


def test_what_a_command_prints_and_its_envelope_are_redacted(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from promptloop.optimizer.cli import ui

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    buf = io.StringIO()
    console = ui._Console(file=buf, soft_wrap=True, emoji=False, color_system=None)
    console.print(f"accepted: idea: Use credentials {KEY} now")
    assert KEY not in buf.getvalue() and "Use credentials *** now" in buf.getvalue()
    monkeypatch.setattr(ui.JSON, "printed", False)
    monkeypatch.setattr(ui.JSON, "result", [{"hypothesis": f"key {KEY}"}])
    ui.write_envelope("optimize", 0)
    out = capsys.readouterr().out
    assert KEY not in out and json.loads(out)["result"]["hypothesis"] == "key ***"


def test_a_rejected_key_read_from_dotenv_names_the_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_FILE)
    monkeypatch.setitem(FROM_DOTENV, "OPENAI_API_KEY", ("/repo/.env", OPENAI_FILE))
    err = CredentialsError("OPENAI_API_KEY", "rejected the API key (HTTP 401)")
    assert "read from /repo/.env" in str(err)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell-0000000000")  # the shell's wins
    err = CredentialsError("OPENAI_API_KEY", "rejected the API key (HTTP 401)")
    assert "environment variable OPENAI_API_KEY" in str(err)


def test_a_provider_key_in_env_names_the_key_env() -> None:
    from pydantic import ValidationError

    from promptloop.optimizer.core.project import AgentConfig

    with pytest.raises(ValidationError) as got:
        AgentConfig.model_validate({"suites": ["s"], "adapter": "command", "command": ["x"],
                                    "env": ["OPENAI_API_KEY"]})
    assert got.value.errors()[0]["loc"][-1] == "env"


def test_a_rejected_key_that_is_not_set_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local --base-url server answered 401 with no key set: the error blamed the (unset)
    environment variable; it says none is set and the server asks for one."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    err = CredentialsError("OPENAI_API_KEY", "rejected the API key (HTTP 401)")
    assert "no OPENAI_API_KEY is set: the server asks for one" in str(err)
