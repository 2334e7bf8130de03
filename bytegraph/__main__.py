"""``python -m bytegraph explain|dump ...``: the command line (cli.py)."""

import sys

from bytegraph.cli import main

sys.exit(main())
