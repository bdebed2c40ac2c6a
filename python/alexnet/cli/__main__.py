"""``python -m alexnet.cli``: the ``alexnet`` command line."""

import sys

from . import main

sys.exit(main())
