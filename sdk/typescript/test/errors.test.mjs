// The server's errors as the SDK's classes.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import {
  Client,
  InvalidArgumentError,
  NotFoundError,
  TaskwireError,
  UnauthenticatedError,
} from "@taskwire/client";
import { client, fleet, unique } from "./fleet.mjs";

test("get of an unknown task rejects with NotFoundError", async () => {
  const c = client();
  await assert.rejects(c.get(randomUUID()), (err) => {
    assert.ok(err instanceof NotFoundError, `${err?.name}: ${err?.message}`);
    assert.ok(err instanceof TaskwireError);
    assert.equal(err.code, "NOT_FOUND");
    assert.equal(err.name, "NotFoundError");
    assert.match(err.message, /\S/);
    return true;
  });
});

test("submit to an unknown agent rejects with NotFoundError (NOT_FOUND)", async () => {
  const c = client();
  const agent = `no-such-agent-${unique()}`;
  await assert.rejects(c.submit({ agent, prompt: "hello" }), (err) => {
    assert.ok(err instanceof NotFoundError, `${err?.name} ${err?.code}: ${err?.message}`);
    assert.equal(err.code, "NOT_FOUND");
    assert.match(err.message, new RegExp(agent));
    return true;
  });
});

test("submit without an agent rejects with InvalidArgumentError", async () => {
  await assert.rejects(client().submit({ agent: "", prompt: "hello" }), InvalidArgumentError);
});

test("a list by an unknown status name is refused before any call", async () => {
  const c = client();
  await assert.rejects(c.list({ status: "sleeping" }), InvalidArgumentError);
});

test("a wrong token rejects with UnauthenticatedError", async (t) => {
  const { addr, token } = fleet();
  if (!token) {
    t.skip("TASKWIRE_TEST_TOKEN is not set (the fleet takes no token)");
    return;
  }
  const c = new Client({ addr, token: `${token}-wrong` });
  await assert.rejects(c.agents(), UnauthenticatedError);
  const none = new Client({ addr });
  await assert.rejects(none.agents(), UnauthenticatedError);
});

test("an unreachable address rejects with UnavailableError", async () => {
  const c = new Client({ addr: "http://127.0.0.1:1" });
  await assert.rejects(c.agents(), (err) => {
    assert.ok(err instanceof TaskwireError);
    assert.equal(err.code, "UNAVAILABLE");
    return true;
  });
});

test("an address that is not http(s) is refused", () => {
  assert.throws(() => new Client({ addr: "grpc://127.0.0.1:50051" }), InvalidArgumentError);
});
