// A task tree: children, a descendant's approval answered through the SDK, cancel.
import assert from "node:assert/strict";
import { test } from "node:test";
import { TimeoutError, DeadlineExceededError, TaskwireError } from "@taskwire/client";
import { client } from "./fleet.mjs";

const T = { timeout: 90_000 };

test("a tree: both children, the asker's approval answered, the parent completes", T, async () => {
  const c = client();
  const parent = await c.submit({ agent: "general", prompt: "parent: two children" });
  const children = [];
  const approvals = [];
  let result;
  for await (const ev of parent.events()) {
    if (ev.kind === "child_task") {
      assert.equal(ev.parentTaskId, parent.taskId);
      assert.equal(ev.childTaskId, ev.taskId);
      children.push(ev);
    } else if (ev.kind === "approval_required") {
      approvals.push(ev);
      const status = await c.approve(ev.taskId, ev.requestId, "once");
      assert.equal(typeof status, "string");
    } else if (ev.kind === "result") {
      result = ev.result;
    }
  }
  assert.deepEqual(children.map((e) => e.agent).sort(), ["asker", "explore"]);
  assert.equal(approvals.length, 1, `one approval: ${JSON.stringify(approvals)}`);
  const asker = children.find((e) => e.agent === "asker");
  assert.equal(approvals[0].taskId, asker.taskId, "the approval names the asking child");
  assert.equal(approvals[0].permission, "bash");
  assert.ok(approvals[0].patterns.length > 0);
  assert.ok(result, "the parent's result");
  assert.equal(result.status, "completed");
  assert.equal(result.text, "done: parent: two children");

  const listed = await c.list({ parentTaskId: parent.taskId });
  assert.deepEqual(listed.map((t) => t.taskId).sort(), children.map((e) => e.taskId).sort());
  for (const t of listed) {
    assert.equal(t.parentTaskId, parent.taskId);
    assert.equal(t.traceId, parent.traceId);
    assert.equal(t.status, "completed");
  }
  const askerInfo = await c.get(asker.taskId);
  assert.equal(askerInfo.result?.text, "done: child: write it");
  // The subtree's usage includes the children's.
  const info = await parent.get();
  assert.ok(info.subtreeUsage.inputTokens > info.usage.inputTokens);
});

test("wait times out with a TimeoutError; cancel ends a waiting tree", T, async () => {
  const c = client();
  const parent = await c.submit({ agent: "general", prompt: "parent: two children" });
  // Until the asker asks (nobody answers here).
  for await (const ev of parent.events()) {
    if (ev.kind === "approval_required") break;
    assert.notEqual(ev.kind, "result");
  }
  await assert.rejects(parent.wait({ timeoutMs: 300 }), (err) => {
    assert.ok(err instanceof TimeoutError);
    assert.ok(err instanceof DeadlineExceededError);
    assert.ok(err instanceof TaskwireError);
    assert.equal(err.code, "DEADLINE_EXCEEDED");
    return true;
  });
  const status = await parent.cancel("sdk test");
  assert.equal(typeof status, "string");
  const result = await parent.wait({ timeoutMs: 45_000 });
  assert.equal(result.status, "cancelled");
  assert.equal((await parent.get()).status, "cancelled");
});
