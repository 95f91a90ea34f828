"""``python -m fxworld ...``: the same as the ``fxworld`` command."""

import sys

from fxworld.cli import main

sys.exit(main())
