"""A Streamable HTTP MCP server for taskwire's MCP tests, built with the official Python SDK.

Run it with the venv that scripts/setup.sh makes:

    $HOME/.cache/taskwire/mcp/venv/bin/python tests/mcp/http_server.py --port 8931

It listens on http://127.0.0.1:PORT/mcp, prints `ready http://127.0.0.1:PORT/mcp` on stdout once
the port accepts connections, and exits on SIGTERM (or SIGINT). Tools: add, shout, fail, sleep,
and grow, which adds a tool and announces the change (`notifications/tools/list_changed`).

mcp 2.x renamed v1's `mcp.server.fastmcp.FastMCP` to `mcp.server.mcpserver.MCPServer` (same
decorator API); importing the old module raises, so this uses the new name.
"""

import argparse
import asyncio
import socket
import sys

import uvicorn
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("taskwire-test-http", version="1.0.0", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers and return the sum as text."""
    return str(a + b)


@server.tool()
def shout(text: str) -> str:
    """Return the text upper-cased."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fail: the result has isError true and the reason in its text."""
    # A ToolError's message reaches the client (as "Error executing tool fail: REASON"); any other
    # exception is treated as a crash and the client sees only "Error executing tool fail".
    raise ToolError(reason)


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep for the given number of seconds, then return "slept"."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called NAME that answers "grown NAME", and tell the client the list changed."""

    def grown() -> str:
        return f"grown {name}"

    server.add_tool(grown, name=name, description=f"Answers grown {name}.")
    # Scoped to this request, the notice travels on the call's own response stream ahead of
    # its result; `send_tool_list_changed()` would use the standalone GET stream, which a
    # client may read after the result (the next session could then start before it).
    await ctx.session.send_notification(
        types.ToolListChangedNotification(), related_request_id=ctx.request_id
    )
    return f"added {name}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    host = "127.0.0.1"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, args.port))
    except OSError as e:
        sys.exit(f"http_server.py: cannot listen on {host}:{args.port}: {e}")
    port = sock.getsockname()[1]

    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    http = uvicorn.Server(config)  # serve() handles SIGTERM/SIGINT: it stops gracefully
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started:  # set once the app's lifespan has run and the socket listens
        if serving.done():
            await serving
            sys.exit(1)
        await asyncio.sleep(0.02)
    print(f"ready http://{host}:{port}/mcp", flush=True)
    await serving

if __name__ == "__main__":
    asyncio.run(main())
