"""Submits a prompt to the `general` agent, waits for the result and prints it.

    python examples/submit_and_wait.py [ADDR] [PROMPT]

ADDR: the coordinator's gRPC address (default $TASKWIRE_ADDR, else
http://127.0.0.1:50051); the bearer token, if any, comes from $TASKWIRE_TOKEN.
"""

from __future__ import annotations

import os
import sys

from taskwire import Client, TaskwireError


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TASKWIRE_ADDR", "http://127.0.0.1:50051")
    prompt = sys.argv[2] if len(sys.argv) > 2 else "say hello"
    token = os.environ.get("TASKWIRE_TOKEN") or None
    try:
        with Client(addr, token=token) as client:
            task = client.submit("general", prompt)
            print(f"submitted {task.task_id} (trace {task.trace_id})")
            result = task.wait(timeout=300)
    except TaskwireError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{result.status}: {result.text}")
    for code, message in result.errors:
        print(f"  {code}: {message}")
    print(f"tokens: {result.usage.input_tokens} in, {result.usage.output_tokens} out")
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
