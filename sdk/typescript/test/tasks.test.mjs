// Submitting, waiting, events, idempotency, commands and agents against a real fleet.
import assert from "node:assert/strict";
import { test } from "node:test";
import { collect, client, unique } from "./fleet.mjs";

const T = { timeout: 60_000 };

test("submit and wait: completed with `done: <prompt>`", T, async () => {
  const c = client();
  const prompt = `hello ${unique()}`;
  const task = await c.submit({ agent: "general", prompt });
  assert.match(task.taskId, /\S/);
  assert.match(task.traceId, /\S/);
  assert.equal(task.created, true);
  const result = await task.wait({ timeoutMs: 45_000 });
  assert.equal(result.status, "completed");
  assert.equal(result.text, `done: ${prompt}`);
  assert.equal(result.taskId, task.taskId);
  assert.ok(result.usage.inputTokens > 0, "the scripted model reports usage");

  const info = await task.get();
  assert.equal(info.taskId, task.taskId);
  assert.equal(info.status, "completed");
  assert.equal(info.agent, "general");
  assert.equal(info.prompt, prompt);
  assert.equal(info.result?.text, `done: ${prompt}`);
  assert.ok(info.createdAt instanceof Date);
  assert.ok(info.attempts.length >= 1);
});

test("a run's events: steps, text and the result, in order", T, async () => {
  const c = client();
  const prompt = `events ${unique()}`;
  const task = await c.submit({ agent: "general", prompt });
  const events = await collect(task);
  const kinds = events.map((e) => e.kind);
  const first = (k) => kinds.indexOf(k);
  assert.ok(first("step_started") >= 0, `a step_started in ${kinds}`);
  assert.ok(first("step_finished") > first("step_started"), `step_finished after step_started in ${kinds}`);
  assert.ok(first("text") > first("step_started"), `text after step_started in ${kinds}`);
  assert.equal(kinds.at(-1), "result", `the result last in ${kinds}`);
  assert.equal(kinds.filter((k) => k === "result").length, 1);
  for (const e of events) assert.equal(e.taskId, task.taskId);
  const text = events.filter((e) => e.kind === "text").map((e) => e.text).join("");
  assert.equal(text, `done: ${prompt}`);
  const result = events.at(-1);
  assert.equal(result.result.status, "completed");
  assert.equal(result.result.text, `done: ${prompt}`);
  // Within an attempt, progress events come in seq order.
  const seqs = events.filter((e) => e.kind !== "result").map((e) => e.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
});

test("every submit option travels (callbackUrl excepted)", T, async () => {
  const c = client();
  const prompt = `options ${unique()}`;
  const deadline = new Date(Date.now() + 3_600_000);
  const task = await c.submit({
    agent: "general",
    prompt,
    sender: "sdk-test",
    intent: "test",
    input: { n: 1, nested: { list: [1, "two", true, null] } },
    authScope: ["read"],
    deadline,
    maxSteps: 5,
    maxAttempts: 2,
    maxCostUsd: 5,
    maxTokens: 100_000,
    priority: 2,
  });
  const result = await task.wait({ timeoutMs: 45_000 });
  assert.equal(result.status, "completed");
  const info = await task.get();
  assert.equal(info.priority, 2);
  assert.equal(info.maxAttempts, 2);
  assert.equal(info.maxCostUsd, 5);
  assert.equal(info.maxTokens, 100_000);
  assert.equal(Math.round(info.deadline.getTime() / 1000), Math.round(deadline.getTime() / 1000));
  const traced = await c.list({ traceId: task.traceId });
  assert.deepEqual(traced.map((t) => t.taskId), [task.taskId]);
  const completed = await c.list({ traceId: task.traceId, status: "completed" });
  assert.equal(completed.length, 1);
  const running = await c.list({ traceId: task.traceId, status: "running" });
  assert.equal(running.length, 0);
});

test("a repeated idempotency key answers the same task, created false", T, async () => {
  const c = client();
  const key = `key-${unique()}`;
  const prompt = `idempotent ${key}`;
  const a = await c.submit({ agent: "general", prompt, idempotencyKey: key });
  const b = await c.submit({ agent: "general", prompt, idempotencyKey: key });
  assert.equal(a.created, true);
  assert.equal(b.created, false);
  assert.equal(b.taskId, a.taskId);
  assert.equal((await b.wait({ timeoutMs: 45_000 })).text, `done: ${prompt}`);
});

test("runCommand greet: `greet NAME` on general", T, async () => {
  const c = client();
  const name = `Ada-${unique()}`;
  const task = await c.runCommand("greet", name);
  assert.equal(task.created, true);
  const result = await task.wait({ timeoutMs: 45_000 });
  assert.equal(result.status, "completed");
  assert.equal(result.text, `done: greet ${name}`);
  assert.equal((await task.get()).agent, "general");
  // With the slash and the arguments as a list, too.
  const again = await c.runCommand("/greet", ["Grace", name]);
  assert.equal((await again.wait({ timeoutMs: 45_000 })).text, `done: greet Grace ${name}`);
});

test("agents() lists general and asker", T, async () => {
  const c = client();
  const agents = await c.agents();
  const names = agents.map((a) => a.name);
  assert.ok(names.includes("general"), `general in ${names}`);
  assert.ok(names.includes("asker"), `asker in ${names}`);
  const asker = agents.find((a) => a.name === "asker");
  assert.equal(asker.mode, "subagent");
  assert.equal(asker.description, "Runs one command, asking first");
  assert.ok(asker.permission.some((r) => r.permission === "bash" && r.action === "ask"));
  assert.ok(agents.every((a) => !a.hidden));
  const all = await c.agents({ includeHidden: true });
  assert.ok(all.length >= agents.length);
});
