"""``python -m wiki_memory.cli``: the ``wiki-memory`` command."""

import sys

from wiki_memory.cli.main import main

sys.exit(main())
