"""`adapter = "http"`: the request is POSTed to the agent's `url`; a non-2xx status, an
unreachable server, a timeout or an oversize body is an errored trial."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest
from promptloop.optimizer.adapters.outcome import AdapterOutcome, TrialLabel, parse_result
from promptloop.optimizer.adapters.process import size_text
from promptloop.optimizer.adapters.registry import Adapter, adapter, settings_of
from promptloop.optimizer.core.adapter_settings import HttpSettings

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _post(url: str, body: bytes, timeout: float, cap: int) -> tuple[int, bytes]:
    """(status, body up to cap + 1 bytes); raises URLError / OSError when unreachable."""
    host = urlsplit(url).hostname or ""
    handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK else []
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json"})
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read(cap + 1)
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read(2000)


async def run_http(spec: HttpSettings, request: TrialRequest, *,
                   label: TrialLabel) -> AdapterOutcome:
    limit = request.timeout_s
    cap = spec.max_output_bytes
    call = asyncio.to_thread(_post, spec.url, request.model_dump_json().encode(), limit, cap)
    try:
        status, body = await asyncio.wait_for(call, limit)
    except TimeoutError:
        return label.errored(f"{spec.url} did not answer within {limit:g}s", timed_out=True)
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            return label.errored(f"{spec.url} did not answer within {limit:g}s",
                                 timed_out=True)
        return label.errored(f"could not reach {spec.url}: {err.reason}")
    except OSError as err:
        return label.errored(f"could not reach {spec.url}: {err}")
    if not 200 <= status < 300:
        text = body.decode("utf-8", "replace").strip()[:500]
        return label.errored(f"{spec.url} answered HTTP {status}" + (f": {text}" if text else ""))
    if len(body) > cap:
        return label.errored(f"{spec.url} answered more than {size_text(cap)}")
    return parse_result(body, label, "answered")


@adapter("http")
class HttpAdapter(Adapter):
    async def attempt(self, request: TrialRequest, context: TrialContext | None
                      ) -> AdapterOutcome:
        return await run_http(settings_of(self, HttpSettings), request,
                              label=TrialLabel(self.setup.agent, request))
