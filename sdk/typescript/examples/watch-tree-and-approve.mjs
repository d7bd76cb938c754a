// Submits `parent: two children` to `general`, follows the tree's events, answers the
// child's approval_required with "once", waits for the result and prints it.
//   node examples/watch-tree-and-approve.mjs [ADDR]
// ADDR: argv, else TASKWIRE_ADDR, else http://127.0.0.1:50051; a token from TASKWIRE_TOKEN.
import { Client, TaskwireError } from "@taskwire/client";

const addr = process.argv[2] || process.env.TASKWIRE_ADDR || "http://127.0.0.1:50051";
const client = new Client({ addr, token: process.env.TASKWIRE_TOKEN || undefined });

try {
  const parent = await client.submit({ agent: "general", prompt: "parent: two children" });
  console.log(`parent ${parent.taskId}`);
  let approved = 0;
  for await (const ev of parent.events()) {
    switch (ev.kind) {
      case "child_task":
        console.log(`child ${ev.taskId} (${ev.agent}): ${ev.description}`);
        break;
      case "tool_call":
        console.log(`  ${ev.taskId === parent.taskId ? "parent" : ev.taskId} ${ev.tool} ${ev.state} ${ev.title}`);
        break;
      case "approval_required":
        console.log(`approval ${ev.requestId}: ${ev.taskId} asks for ${ev.permission} ${ev.patterns.join(" ")}`);
        await client.approve(ev.taskId, ev.requestId, "once");
        approved++;
        console.log("  answered: once");
        break;
      case "result":
        console.log(`result event: ${ev.result.status}`);
        break;
    }
  }
  const result = await parent.wait({ timeoutMs: 60_000 });
  console.log(`${result.status}: ${result.text}`);
  for (const child of await client.list({ parentTaskId: parent.taskId })) {
    console.log(`  child ${child.taskId} ${child.agent} ${child.status}: ${child.result?.text ?? ""}`);
  }
  if (result.status !== "completed" || approved === 0) process.exitCode = 1;
} catch (err) {
  if (err instanceof TaskwireError) console.error(`taskwire: ${err.code}: ${err.message}`);
  else console.error(err);
  process.exitCode = 1;
}
