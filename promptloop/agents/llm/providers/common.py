"""Helpers shared by the SDK-backed providers: keys, retry counting, error mapping.

Both SDKs (anthropic, openai) come from the same generator, so their raw responses carry
`retries_taken` and every request carries an `x-stainless-retry-count` header; that is how
`ModelResponse.retries` and `ProviderError.retries` are counted without patching the SDKs.
"""

from __future__ import annotations

import contextlib
import inspect
import ipaddress
import os
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

from promptloop.agents.llm.errors import (
    CredentialsError,
    ModelConfigError,
    ModelError,
    ProviderError,
)
from promptloop.agents.llm.options import ModelOptions
from promptloop.agents.llm.types import Message, ModelResponse, ModelSettings, ToolSpec
from promptloop.agents.secrets import scrub

C = TypeVar("C")

_RETRY_HEADER = "x-stainless-retry-count"
_MAX_DETAIL = 300


def env_value(name: str) -> str | None:
    """An environment variable, or None when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def is_local_url(url: str | None) -> bool:
    """True for URLs on this machine (localhost, loopback addresses, `*.localhost`)."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host in {"localhost", "0.0.0.0"} or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def json_schema_format(response_format: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    """Normalise `ModelSettings.response_format` to (name, schema, strict).

    Accepts either a bare JSON schema or the OpenAI wrapper
    `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`.
    """
    if response_format.get("type") == "json_schema" and isinstance(
        response_format.get("json_schema"), dict
    ):
        inner = response_format["json_schema"]
        schema = inner.get("schema")
        if not isinstance(schema, dict):
            raise ModelConfigError("response_format.json_schema has no 'schema' object")
        return str(inner.get("name") or "step"), schema, bool(inner.get("strict", True))
    return "step", response_format, True


async def parse_raw(raw: Any) -> tuple[Any, int]:
    """Parse an SDK raw response (sync `.parse()` in openai, async in anthropic)."""
    parsed = raw.parse()
    if inspect.isawaitable(parsed):
        parsed = await parsed
    return parsed, int(getattr(raw, "retries_taken", 0) or 0)


async def send_parsed(
    send: Callable[[], Awaitable[Any]], *, label: str, max_retries: int
) -> tuple[Any, int]:
    """Send with an SDK raw-response call and parse the body.

    A body that does not parse (truncated or garbled JSON from a flaky server or proxy) is
    retried like a 5xx, at most `max_retries` times, then becomes a ProviderError; the returned
    retry count includes those attempts and the SDK's own retries.
    """
    retries = 0
    garbled = 0
    while True:
        raw = await send()
        retries += int(getattr(raw, "retries_taken", 0) or 0)
        try:
            parsed, _ = await parse_raw(raw)
        except ValueError as err:  # json.JSONDecodeError and pydantic errors
            if garbled >= max_retries:
                detail = str(err)[:_MAX_DETAIL]
                raise ProviderError(
                    f"{label} returned an unparseable response body after {retries} "
                    f"retries: {detail}",
                    retries=retries,
                ) from None
            garbled += 1
            retries += 1
            continue
        return parsed, retries


def retries_from_error(err: BaseException) -> int:
    """How many retries preceded the attempt that raised `err` (from its request headers)."""
    request = None
    response = getattr(err, "response", None)
    if response is not None:
        request = getattr(response, "request", None)
    if request is None:
        try:
            request = getattr(err, "request", None)
        except RuntimeError:  # httpx raises when a request was never attached
            request = None
    headers = getattr(request, "headers", None)
    if headers is None:
        return 0
    try:
        return int(headers.get(_RETRY_HEADER, "0"))
    except (TypeError, ValueError):
        return 0


def _public_url(sdk: Any) -> str:
    """The SDK client's base URL without user info, query or fragment."""
    url = str(getattr(sdk, "base_url", "") or "?")
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return url


def map_sdk_error(
    err: BaseException, *, label: str, key_var: str, secrets: tuple[str | None, ...]
) -> ModelError:
    """Turn an SDK exception into CredentialsError / ProviderError (no key material inside)."""
    retries = retries_from_error(err)
    status = getattr(err, "status_code", None)
    if status in (401, 403):
        return CredentialsError(key_var, f"{label} rejected the API key (HTTP {status})")
    if isinstance(status, int):
        detail = scrub(str(getattr(err, "message", "") or err), secrets)[:_MAX_DETAIL]
        return ProviderError(
            f"{label} returned HTTP {status} after {retries} retries: {detail}",
            retries=retries,
            status=status,
        )
    kind = "timed out" if "timeout" in type(err).__name__.lower() else "could not be reached"
    detail = scrub(str(err), secrets)[:_MAX_DETAIL]
    return ProviderError(f"{label} {kind} after {retries} retries: {detail}", retries=retries)


__all__ = [
    "env_value",
    "is_local_url",
    "json_schema_format",
    "map_sdk_error",
    "parse_raw",
    "retries_from_error",
    "scrub",
    "send_parsed",
]


class SDKProvider(Generic[C]):
    """What the SDK-backed providers share: model id, options, an injectable SDK client that
    is otherwise built on first use, a repr without secrets, closing what it owns, and the
    `complete()` / `preflight()` flow (build the SDK client, the request, send it with retry
    counting and error mapping, parse the reply). A provider overrides only what differs:
    `_sdk`, `request_params`, `_create` (the SDK's raw-response call), `_api_error`,
    `_response`, `_ping` and, if it likes, `_unknown_model`."""

    PROVIDER = ""
    KEY_VAR = ""
    BASE_URL_VAR = ""
    LABEL = ""
    """How error messages name the API (e.g. "Anthropic API")."""

    def _sdk(self) -> C:
        raise NotImplementedError

    def request_params(self, messages: list[Message],
                       tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
                       settings: ModelSettings | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def _create(self, sdk: C) -> Callable[..., Awaitable[Any]]:
        """The SDK's raw-response create call (e.g. `sdk.messages.with_raw_response.create`)."""
        raise NotImplementedError

    def _api_error(self) -> type[Exception]:
        """The SDK's base error class (imported lazily)."""
        raise NotImplementedError

    def _response(self, raw: Any, retries: int) -> ModelResponse:
        """The SDK reply as a ModelResponse."""
        raise NotImplementedError

    def _ping(self) -> dict[str, Any]:
        """The parameters of preflight's 1-token request."""
        raise NotImplementedError

    def _unknown_model(self) -> str:
        return f"{self.LABEL} does not know the model '{self.model}'"

    async def complete(self, messages: list[Message], *,
                       tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
                       settings: ModelSettings | None = None) -> ModelResponse:
        sdk = self._sdk()
        kwargs = self.request_params(messages, tools, settings)
        if settings is not None:
            kwargs["timeout"] = settings.timeout_s
        raw, retries = await self._send(sdk, kwargs)
        return self._response(raw, retries)

    async def _send(self, sdk: C, kwargs: dict[str, Any]) -> tuple[Any, int]:
        create = self._create(sdk)
        try:
            return await send_parsed(lambda: create(**kwargs), label=self.LABEL,
                                     max_retries=self._options.max_retries)
        except self._api_error() as err:
            mapped = map_sdk_error(err, label=self.LABEL, key_var=self.KEY_VAR,
                                   secrets=self._secrets())
            if isinstance(mapped, ProviderError) and mapped.status is None:  # no answer at all
                mapped = ProviderError(f"{mapped} (the server: {_public_url(sdk)})",
                                       retries=mapped.retries)
            raise mapped from None

    async def preflight(self) -> None:
        """One 1-token request: checks the key, the server and the model name before any
        trial runs."""
        sdk = self._sdk()
        try:
            await self._send(sdk, self._ping())
        except ProviderError as err:
            if err.status == 404:
                raise ModelConfigError(self._unknown_model()) from None
            raise

    def __init__(
        self,
        model: str,
        *,
        client: C | None = None,
        options: ModelOptions | None = None,
        model_id: str | None = None,
    ) -> None:
        if not model:
            raise ModelConfigError(
                f"{self.PROVIDER} model name is empty; use '{self.PROVIDER}:<model>'"
            )
        self.model = model
        self.model_id = model_id or f"{self.PROVIDER}:{model}"
        self._options = options or ModelOptions()
        self._client: C | None = client
        self._owns_client = client is None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._base_url()!r})"

    def _base_url(self) -> str | None:
        if self._client is not None:
            return str(getattr(self._client, "base_url", "")) or None
        return self._options.base_url or env_value(self.BASE_URL_VAR)

    def _secrets(self) -> tuple[str | None, ...]:
        injected = getattr(self._client, "api_key", None) if self._client is not None else None
        return (env_value(self.KEY_VAR), injected)

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.close()  # type: ignore[attr-defined]
            self._client = None
