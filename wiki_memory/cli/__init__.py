"""The ``wiki-memory`` command: argument parsing plus one core or server call each."""
