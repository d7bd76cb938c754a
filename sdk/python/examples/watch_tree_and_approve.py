"""Submits `parent: two children` to the `general` agent, follows the whole tree's
events, answers the child's approval request with "once", and prints the result.

    python examples/watch_tree_and_approve.py [ADDR]

ADDR: the coordinator's gRPC address (default $TASKWIRE_ADDR, else
http://127.0.0.1:50051); the bearer token, if any, comes from $TASKWIRE_TOKEN.
With the dev fleet's scripted model (scripts/dev-fleet.sh), the parent starts an
`asker` child, which asks before running a command, and an `explore` child.
"""

from __future__ import annotations

import os
import sys

from taskwire import (
    ApprovalRequired,
    ChildTask,
    Client,
    ResultEvent,
    TaskwireError,
    Text,
    ToolCall,
)


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TASKWIRE_ADDR", "http://127.0.0.1:50051")
    token = os.environ.get("TASKWIRE_TOKEN") or None
    answered = set()
    result = None
    try:
        with Client(addr, token=token) as client:
            task = client.submit("general", "parent: two children")
            print(f"submitted {task.task_id}")
            for event in task.events(timeout=300):
                if isinstance(event, ChildTask):
                    print(f"child {event.task_id}: {event.agent} ({event.description})")
                elif isinstance(event, ToolCall):
                    print(f"  [{event.task_id[-12:]}] {event.tool} {event.state} {event.title}")
                elif isinstance(event, Text):
                    print(f"  [{event.task_id[-12:]}] text: {event.text!r}")
                elif isinstance(event, ApprovalRequired):
                    print(
                        f"approval {event.request_id} asked by {event.task_id}: "
                        f"{event.permission} {' '.join(event.patterns)}"
                    )
                    if event.request_id not in answered:
                        answered.add(event.request_id)
                        status = client.approve(event.task_id, event.request_id, "once")
                        print(f"  answered once (task {status})")
                elif isinstance(event, ResultEvent):
                    result = event.result
            children = client.list(parent_task_id=task.task_id)
    except TaskwireError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if result is None:
        print("the watch ended without a result", file=sys.stderr)
        return 1
    for child in children:
        print(f"child {child.task_id} ({child.agent}): {child.status}")
    print(f"{result.status}: {result.text}")
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
