"""Errors of the model layer.

Every error here is an *infrastructure* problem (configuration, credentials, provider down),
never an agent failure: the runner records trials that hit one as `errored`, not `failed`.
"""

from __future__ import annotations

import os

from promptloop.agents.secrets import dotenv_source


class ModelError(Exception):
    """Base class: something outside the agent's control went wrong."""


class ModelConfigError(ModelError):
    """Unknown provider, malformed model id, missing optional package."""


class CredentialsError(ModelError):
    """A key is missing or rejected. The message names the environment variable, never its value.

    `missing`: no key is set at all, a configuration error the user fixes by setting the
    variable (the CLI exits 1); a key the provider rejects stays an infrastructure failure."""

    def __init__(self, variable: str, detail: str, *, missing: bool = False) -> None:
        source = dotenv_source(variable)
        if missing:
            hint = f": set the environment variable {variable}"
        elif source:
            hint = f" ({variable}, read from {source})"
        elif not os.environ.get(variable):  # a local server that asks for a key after all
            hint = f" (no {variable} is set: the server asks for one; set it)"
        else:
            hint = f" (environment variable {variable})"
        super().__init__(f"{detail}{hint}")
        self.variable = variable
        self.missing = missing


class ProviderError(ModelError):
    """The provider failed after all retries (429/5xx/timeouts) or returned garbage."""

    def __init__(self, message: str, *, retries: int = 0, status: int | None = None) -> None:
        super().__init__(message)
        self.retries = retries
        self.status = status
        """The provider's HTTP status, when it answered with one (None: no answer, garbage)."""

    @property
    def overloaded(self) -> bool:
        """Whether the provider pushed back: HTTP 429 (rate limit) or 5xx (529 overloaded)."""
        return self.status is not None and (self.status == 429 or 500 <= self.status <= 599)


class ScriptExhaustedError(ModelError):
    """A scripted test model was asked for more responses than it was given."""


class BatchTimeoutError(ModelError):
    """A provider batch did not end in time; a rerun with the same requests resumes it."""
