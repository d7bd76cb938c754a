"""An MCP client for taskwire's MCP tests, built with the official Python SDK.

It connects to a server under test, initialises, lists the tools, runs a script of tool calls
in order and prints ONE JSON object on stdout:

    {"protocol_version": "...", "server_name": "...",
     "tools": [{"name": ..., "description": ..., "input_schema": {...}}, ...],
     "results": [{"is_error": bool, "text": "joined text content",
                  "structured": <structuredContent or null>,
                  "rpc_error": null | {"code": int, "message": str}}, ...]}

A tool error (isError: true) is a result. So is a JSON-RPC error answering one call: that
result has is_error true, the error's message as text and rpc_error set. Exit status 0 when
all of that worked; 1, with a message on stderr, when the connection, the initialisation or
the tools listing fails, or the whole run exceeds --timeout; 2 for bad usage.

Usage (run it with $HOME/.cache/taskwire/mcp/venv/bin/python):

    client.py [OPTIONS] stdio -- COMMAND ARGS...
    client.py [OPTIONS] http URL [--bearer TOKEN]

OPTIONS (anywhere before `--`; `--calls JSON` may also be the last two arguments after the
stdio command):
    --calls JSON      '[{"tool": "NAME", "arguments": {...}}, ...]' (default: no calls)
    --bearer TOKEN    http only: send `Authorization: Bearer TOKEN`
    --mode MODE       legacy (default: the initialize handshake), auto (probe server/discover
                      first, then fall back to initialize), or a modern version, e.g. 2026-07-28
    --timeout SECS    limit for the whole run (default 60)

stdio servers get this process's whole environment and share its stderr.
"""

import argparse
import json
import os
import sys
from contextlib import AsyncExitStack

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent


def usage(message: str) -> None:
    print(f"client.py: {message}", file=sys.stderr)
    print(__doc__[__doc__.index("Usage") :], file=sys.stderr)
    sys.exit(2)


def parse_args(argv: list[str]) -> argparse.Namespace:
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
        # The brief form `client.py stdio -- COMMAND ARGS... --calls JSON`.
        if len(command) >= 2 and command[-2] == "--calls":
            argv, command = argv + command[-2:], command[:-2]
    parser = argparse.ArgumentParser(add_help=True, usage=__doc__)
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("url", nargs="?")
    parser.add_argument("--calls", default="[]")
    parser.add_argument("--bearer")
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    args.command = command
    if args.transport == "stdio":
        if args.url is not None or not command:
            usage("stdio wants `-- COMMAND ARGS...` and no URL")
        if args.bearer is not None:
            usage("--bearer is for http only")
    else:
        if args.url is None or command:
            usage("http wants a URL and no `-- COMMAND`")
    try:
        calls = json.loads(args.calls)
    except json.JSONDecodeError as e:
        usage(f"--calls is not JSON: {e}")
    if not isinstance(calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("tool"), str) and isinstance(c.get("arguments", {}), dict)
        for c in calls
    ):
        usage('--calls must be a list of {"tool": NAME, "arguments": {...}}')
    args.calls = calls
    return args


def result_json(result) -> dict:
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    return {
        "is_error": bool(result.is_error),
        "text": text,
        "structured": result.structured_content,
        "rpc_error": None,
    }


async def run(args: argparse.Namespace) -> dict:
    async with AsyncExitStack() as stack:
        if args.transport == "stdio":
            server = StdioServerParameters(command=args.command[0], args=args.command[1:], env=dict(os.environ))
        else:
            headers = {"Authorization": f"Bearer {args.bearer}"} if args.bearer is not None else None
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            server = streamable_http_client(args.url, http_client=http)
        client = await stack.enter_async_context(Client(server, mode=args.mode))

        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                break

        results = []
        for call in args.calls:
            try:
                results.append(result_json(await client.call_tool(call["tool"], call.get("arguments", {}))))
            except MCPError as e:
                results.append(
                    {
                        "is_error": True,
                        "text": e.message,
                        "structured": None,
                        "rpc_error": {"code": e.code, "message": e.message},
                    }
                )

        info = client.server_info
        return {
            "protocol_version": client.protocol_version,
            "server_name": info.name if info is not None else None,
            "tools": tools,
            "results": results,
        }


def describe(exc: BaseException) -> str:
    """One line per leaf exception, task groups unwrapped."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def main() -> None:
    args = parse_args(sys.argv[1:])
    out: dict = {}

    async def timed() -> None:
        with anyio.fail_after(args.timeout):
            out.update(await run(args))

    try:
        anyio.run(timed)
    except TimeoutError:
        print(f"client.py: timed out after {args.timeout}s", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        print(f"client.py: {describe(e)}", file=sys.stderr)
        sys.exit(1)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
