"""The MCP face: tools over the core, the ``/mcp`` endpoint and the stdio bridge."""
