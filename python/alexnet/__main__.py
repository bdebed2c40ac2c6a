"""``python -m alexnet``: the command line, as ``alexnet``."""

import sys

from .cli import main

sys.exit(main())
