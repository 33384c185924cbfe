"""``python -m openprogram``: the ``openprogram`` command where no console script is installed."""

import sys

from openprogram._cli import main

sys.exit(main())
