"""The ``nas`` command line: a thin layer over the library, one module per subcommand."""

from nas.cli.main import main

__all__ = ["main"]
