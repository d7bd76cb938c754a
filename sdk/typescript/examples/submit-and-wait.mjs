// Submits a prompt to the `general` agent, prints its events as they come, then its result.
//   node examples/submit-and-wait.mjs [ADDR] [PROMPT]
// ADDR: argv, else TASKWIRE_ADDR, else http://127.0.0.1:50051; a token from TASKWIRE_TOKEN.
import { Client, TaskwireError } from "@taskwire/client";

const addr = process.argv[2] || process.env.TASKWIRE_ADDR || "http://127.0.0.1:50051";
const prompt = process.argv[3] || "say hello";
const client = new Client({ addr, token: process.env.TASKWIRE_TOKEN || undefined });

try {
  const task = await client.submit({ agent: "general", prompt });
  console.log(`submitted ${task.taskId} (trace ${task.traceId})`);
  for await (const ev of task.events()) {
    if (ev.kind === "text") process.stdout.write(ev.text);
    else if (ev.kind !== "result") console.log(`[${ev.kind}]`);
  }
  process.stdout.write("\n");
  const result = await task.wait({ timeoutMs: 60_000 });
  console.log(`${result.status}: ${result.text}`);
  console.log(`tokens: ${result.usage.inputTokens} in, ${result.usage.outputTokens} out`);
  if (result.status !== "completed") process.exitCode = 1;
} catch (err) {
  if (err instanceof TaskwireError) console.error(`taskwire: ${err.code}: ${err.message}`);
  else console.error(err);
  process.exitCode = 1;
}
