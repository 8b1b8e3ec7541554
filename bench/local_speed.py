"""Embedded model speed: `local:smollm2` tokens per second on this machine (run by hand).

Starts the embedded llama.cpp server (the same one `local:smollm2` uses) and reads the server's
own timings: prompt processing on the real PKM system prompt (~1.9k tokens, prefix cache off),
generation at short and at long context (EOS ignored so every run generates the same count),
and the wall time of one real Card Agent step in structured tool mode, cold and with the
prompt prefix cached (what each agent call of a trial costs).

    .venv/bin/python bench/local_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.llm.providers.local import LocalModelClient, acquire_server, release_server
from promptloop.agents.llm.types import Message
from promptloop.agents.registry import get_agent
from promptloop.agents.runtime import RuntimeConfig
from promptloop.agents.workspace import Workspace


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def raw_speeds(url: str, repeats: int) -> dict[str, list[float]]:
    system = load_prompt("pkm_agent")
    long_ctx = [{"role": "system", "content": system}, {"role": "user", "content": "Hello."}]
    short_ctx = [{"role": "user", "content": "Tell me about the sea."}]
    out: dict[str, list[float]] = {
        "prompt tok/s (PKM system prompt, no cache)": [],
        "prompt tokens": [],
        "generation tok/s (short context, 128 tokens)": [],
        "generation tok/s (after PKM prompt, 64 tokens)": [],
    }
    for _ in range(repeats):
        t = post(url, {"messages": long_ctx, "max_tokens": 1, "cache_prompt": False})["timings"]
        out["prompt tok/s (PKM system prompt, no cache)"].append(t["prompt_per_second"])
        out["prompt tokens"].append(t["prompt_n"])
        body = {"messages": short_ctx, "max_tokens": 128, "ignore_eos": True, "temperature": 0}
        t = post(url, body)["timings"]
        out["generation tok/s (short context, 128 tokens)"].append(t["predicted_per_second"])
        body = {"messages": long_ctx, "max_tokens": 64, "ignore_eos": True, "temperature": 0}
        t = post(url, body)["timings"]
        out["generation tok/s (after PKM prompt, 64 tokens)"].append(t["predicted_per_second"])
    return out


async def agent_steps(repeats: int) -> dict[str, list[float]]:
    """Wall time of one Card Agent model call (structured tool mode), cold and warm."""
    client = LocalModelClient()
    out: dict[str, list[float]] = {"card step, first call (s)": [], "card step, cached (s)": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fact = "2026/03/14.md#ts_1"
            inp = AgentInput(fact, "Coffee at Bean Bar 4.20", datetime(2026, 3, 14, 9, 30))
            ws = Workspace(Path(tmp))
            prepare_workspace(ws, inp)
            session = get_agent("card_agent")(ws, inp, load_prompt("card_agent"))
            messages = [
                Message.system(session.system_prompt),
                Message.user(session.first_message()),
            ]
            specs = [t.spec() for t in session.tools]
            settings = RuntimeConfig().settings
            for i in range(repeats + 1):
                t0 = time.perf_counter()
                await client.complete(messages, tools=specs, settings=settings)
                key = "card step, first call (s)" if i == 0 else "card step, cached (s)"
                out[key].append(time.perf_counter() - t0)
    finally:
        await client.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    t0 = time.perf_counter()
    server = acquire_server()
    started = time.perf_counter() - t0
    try:
        assert server.url is not None
        results = raw_speeds(server.url, args.repeats)
        results |= asyncio.run(agent_steps(args.repeats))
    finally:
        release_server()
    print(f"embedded local:smollm2 (llama.cpp via xllamacpp), server start {started:.2f} s")
    for name, values in results.items():
        print(
            f"{name:46s} median {statistics.median(values):8.1f}   "
            f"range {min(values):.1f}-{max(values):.1f}"
        )


if __name__ == "__main__":
    main()
