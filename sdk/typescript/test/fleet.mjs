// What the tests share: the fleet's address (TASKWIRE_TEST_ADDR, required: the tests
// fail without it) and optional token (TASKWIRE_TEST_TOKEN), and a client of it.
import { randomUUID } from "node:crypto";
import { Client } from "@taskwire/client";

export function fleet() {
  const addr = process.env.TASKWIRE_TEST_ADDR;
  if (!addr) {
    throw new Error(
      "TASKWIRE_TEST_ADDR is not set: these tests run against a taskwire fleet " +
        "(e.g. TASKWIRE_TEST_ADDR=http://127.0.0.1:50051 with scripts/dev-fleet.sh running)",
    );
  }
  return { addr, token: process.env.TASKWIRE_TEST_TOKEN || undefined };
}

export function client(overrides = {}) {
  const f = fleet();
  return new Client({ addr: f.addr, token: f.token, ...overrides });
}

/** A suffix that makes a prompt or key unique to this run (the fleet's database persists). */
export function unique() {
  return randomUUID().slice(0, 8);
}

/** Collects a task's events until its result. */
export async function collect(task) {
  const events = [];
  for await (const ev of task.events()) events.push(ev);
  return events;
}
