#!/usr/bin/env node
// The action-items agent: meeting notes in, action items (task, owner, due date) out.
//
// It speaks promptloop's trial contract "promptloop.trial/1" (docs/agents.md):
//   node agent/agent.js            one request (JSON) on stdin, one result (JSON) on stdout
//   node agent/agent.js --worker   JSON lines: one request per stdin line, one result per
//                                  stdout line, for as long as stdin stays open
// Logs go to stderr only. Node 20, no npm packages: the model is called with the built-in fetch.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");
const { SYSTEM_PROMPT } = require("./prompt.js");

const CONTRACT = "promptloop.trial/1";
const MAX_TOKENS = 400;
const MAX_ITEMS = 5;
const ACTIONS_FILE = "actions.json";

// Small models follow a structure only when the server constrains the output to a schema;
// the length limits keep a looping model from running out of tokens mid-JSON.
const ACTION_ITEMS_SCHEMA = {
  type: "object",
  properties: {
    items: {
      type: "array",
      maxItems: MAX_ITEMS,
      items: {
        type: "object",
        properties: {
          task: { type: "string", maxLength: 100 },
          owner: { type: ["string", "null"], maxLength: 40 },
          due: { anyOf: [{ type: "string", pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" }, { type: "null" }] },
        },
        required: ["task", "owner", "due"],
        additionalProperties: false,
      },
    },
    summary: { type: "string", maxLength: 200 },
  },
  required: ["items", "summary"],
  additionalProperties: false,
};

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

class TrialError extends Error {
  constructor(cause, message) {
    super(message);
    this.errorCause = cause; // "agent" | "infrastructure"
  }
}

function log(message) {
  process.stderr.write(`[action_items] ${message}\n`);
}

// Every text that leaves the process passes through here: the per-run key never does.
function redact(text, secret) {
  let out = String(text);
  if (typeof secret === "string" && secret.length > 0) {
    // the key as written and as it appears inside a JSON string
    for (const form of [secret, JSON.stringify(secret).slice(1, -1)]) out = out.split(form).join("***");
  }
  return out;
}

// "2026-03-10T10:00:00" -> "2026-03-10 (Tuesday)"; anything unparsable is passed on as given.
function meetingDate(publishedAt) {
  const day = String(publishedAt || "").slice(0, 10);
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!m) return String(publishedAt || "unknown");
  const weekday = WEEKDAYS[new Date(Date.UTC(+m[1], +m[2] - 1, +m[3])).getUTCDay()];
  return `${day} (${weekday})`;
}

function userMessage(request) {
  const notes = ((request.task || {}).input || {}).content || "";
  return `Meeting date: ${meetingDate(request.published_at)}\n\nMeeting notes:\n${notes}`;
}

// The model's reply as JSON; a fenced or padded object is accepted, anything else is the
// agent's failure (cause "agent").
function parseReply(content) {
  let data;
  try {
    data = JSON.parse(content);
  } catch (_) {
    const start = content.indexOf("{");
    const end = content.lastIndexOf("}");
    try {
      data = start >= 0 && end > start ? JSON.parse(content.slice(start, end + 1)) : undefined;
    } catch (_) {
      data = undefined;
    }
  }
  if (data === undefined) {
    throw new TrialError("agent", `the model's reply is not valid JSON: ${JSON.stringify(content.slice(0, 200))}`);
  }
  if (data === null || typeof data !== "object" || Array.isArray(data) || !Array.isArray(data.items)) {
    throw new TrialError("agent", "the model's reply has no 'items' list");
  }
  const text = (v) => (typeof v === "string" && v.trim() !== "" ? v.trim() : null);
  const items = data.items
    .filter((it) => it !== null && typeof it === "object" && !Array.isArray(it))
    .map((it) => ({ task: text(it.task) || "", owner: text(it.owner), due: text(it.due) }));
  return { items, summary: typeof data.summary === "string" ? data.summary.trim() : "" };
}

async function callModel(request, messages) {
  const model = request.model || {};
  const baseUrl = String(model.base_url || "").replace(/\/+$/, "");
  if (!baseUrl) throw new TrialError("infrastructure", "the request names no model.base_url");
  const timeoutS = Number(request.timeout_s) > 0 ? Number(request.timeout_s) : 120;
  // Answer a little before promptloop's own limit, so the timeout is reported, not killed.
  const limitMs = Math.max(500, timeoutS * 1000 - Math.min(5000, timeoutS * 100));
  const body = {
    model: model.model,
    messages,
    response_format: { type: "json_schema", json_schema: { name: "action_items", strict: true, schema: ACTION_ITEMS_SCHEMA } },
    temperature: 0,
    max_tokens: MAX_TOKENS,
  };
  const seed = (request.trial || {}).seed;
  if (Number.isInteger(seed)) body.seed = seed;
  let response;
  let raw;
  try {
    response = await fetch(`${baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${model.api_key || ""}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(limitMs),
    });
    raw = await response.text();
  } catch (err) {
    const why = err && err.name === "TimeoutError"
      ? `no answer within ${(limitMs / 1000).toFixed(1)} s`
      : `${err && err.message}${err && err.cause ? ` (${err.cause.code || err.cause.message})` : ""}`;
    throw new TrialError("infrastructure", `the model endpoint failed: ${why}`);
  }
  if (!response.ok) {
    throw new TrialError("infrastructure", `the model endpoint answered HTTP ${response.status}: ${raw.slice(0, 300)}`);
  }
  let data;
  try {
    data = JSON.parse(raw);
  } catch (_) {
    throw new TrialError("infrastructure", `the model endpoint answered HTTP ${response.status} with a body that is not JSON`);
  }
  const choice = Array.isArray(data.choices) ? data.choices[0] : undefined;
  const content = choice && choice.message ? choice.message.content : undefined;
  if (typeof content !== "string") {
    throw new TrialError("infrastructure", "the model endpoint's answer has no choices[0].message.content");
  }
  const usage = data.usage || {};
  return {
    content,
    usage: { input_tokens: usage.prompt_tokens || 0, output_tokens: usage.completion_tokens || 0 },
  };
}

async function runTrial(request) {
  const prompt = request.prompt && typeof request.prompt.text === "string" ? request.prompt.text : SYSTEM_PROMPT;
  const messages = [
    { role: "system", content: prompt },
    { role: "user", content: userMessage(request) },
  ];
  const result = { contract: CONTRACT, outcome: {}, transcript: messages.slice(), usage: null, error: null };
  try {
    const reply = await callModel(request, messages);
    result.usage = reply.usage;
    result.transcript.push({ role: "assistant", content: reply.content });
    const parsed = parseReply(reply.content);
    if (request.workspace) {
      try {
        fs.writeFileSync(path.join(request.workspace, ACTIONS_FILE), `${JSON.stringify(parsed, null, 2)}\n`);
      } catch (err) {
        throw new TrialError("infrastructure", `cannot write ${ACTIONS_FILE} into the workspace: ${err.message}`);
      }
    }
    result.outcome = { items: parsed.items, summary: parsed.summary, n_items: parsed.items.length };
  } catch (err) {
    const cause = err instanceof TrialError ? err.errorCause : "agent";
    result.error = { cause, message: err instanceof TrialError ? err.message : `agent bug: ${err && err.stack}` };
  }
  return result;
}

// One request (text) -> one result line; a request that is not JSON is promptloop's problem.
async function handle(text) {
  let request;
  try {
    request = JSON.parse(text);
    if (request === null || typeof request !== "object" || Array.isArray(request)) throw new Error("not an object");
  } catch (err) {
    return { contract: CONTRACT, outcome: {}, error: { cause: "infrastructure", message: `the request is not a JSON object: ${err.message}` } };
  }
  const secret = (request.model || {}).api_key;
  const started = Date.now();
  const result = await runTrial(request);
  const taskId = (request.task || {}).id;
  const status = result.error ? `${result.error.cause} error` : `${result.outcome.n_items} item(s)`;
  log(redact(`task ${taskId} trial ${(request.trial || {}).index}: ${status} in ${Date.now() - started} ms`, secret));
  return JSON.parse(redact(JSON.stringify(result), secret));
}

async function worker() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    const result = await handle(line);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  }
}

async function single() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const result = await handle(Buffer.concat(chunks).toString("utf8"));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

(process.argv.includes("--worker") ? worker() : single()).catch((err) => {
  log(`fatal: ${err && err.message}`);
  process.exit(1);
});
