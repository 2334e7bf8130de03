"""``python -m bytegraph run|explain|dump ...``: the command line (inspect/cli.py)."""

import sys

from bytegraph.inspect.cli import main

sys.exit(main())
