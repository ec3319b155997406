"""The harness side: installing hooks and MCP entries in each client's own files, and
the hooks' outbox."""
