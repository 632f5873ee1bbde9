"""``python -m simulator --out DIR ...``: write a simulated world (``--help`` for the options)."""

import sys

from simulator.cli_args import main

sys.exit(main())
