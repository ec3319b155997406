"""The MCP bridge's entry point that users' client configurations name:
``<python> -S .../wiki_memory/cli_mcp.py [--data-dir D] mcp [...]`` (``install-mcp``
writes it). A shim kept at this path so those configurations keep working: it guards
stdout before ``site`` runs (sitecustomize, .pth files), then runs the ``wiki-memory``
command. The bridge itself is :mod:`wiki_memory.mcp.bridge`.
"""

import os
import sys


def _script_main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    # this file's folder is not a place to import from (wiki_memory/mcp would shadow the
    # MCP SDK); the folder holding the package is
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.path.dirname(here))
    from wiki_memory.mcp import bridge

    fd = bridge.guard_stdout()
    if sys.flags.no_site:
        import site

        site.main()
    bridge._protocol_fd = fd
    from wiki_memory.cli.main import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(_script_main())
