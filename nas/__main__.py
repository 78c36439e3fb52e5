"""``python -m nas``: the ``nas`` command."""

import sys

from nas.cli import main

sys.exit(main())
