"""``python -m tracer.cli``: the same as the ``prunegate`` console script."""

import sys

from tracer.cli import main

sys.exit(main())
