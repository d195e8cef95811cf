"""The Code Mode MCP server: the two tools, hosting over stdio and HTTP, HTTP guards and operations endpoints."""
