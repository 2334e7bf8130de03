"""``python -m bytegraph run|explain|dump ...``: the command line (cli.py)."""

import sys

from bytegraph.cli import main

sys.exit(main())
