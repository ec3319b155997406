"""wiki-memory: long-term memory for AI coding agents, kept as a git-versioned markdown wiki."""

__version__ = "0.1.0"
