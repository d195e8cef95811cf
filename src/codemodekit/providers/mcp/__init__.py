"""Tools from MCP servers over stdio, Streamable HTTP and legacy SSE."""
