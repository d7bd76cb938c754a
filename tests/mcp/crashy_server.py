"""A stdio MCP server (the official SDK's MCPServer) whose `crash` tool kills the process
mid-call: the client under test must fail that call clearly and start the server again
for the next one. `pid` answers the process id, so a test can see the restart."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("taskwire-test-crashy", version="1.0.0", log_level="WARNING")


@server.tool()
def crash() -> str:
    """Exit the server process at once, without answering."""
    os._exit(3)


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


if __name__ == "__main__":
    server.run()
