"""``python -m gpuledger.cli``: the ``gpuledger`` command."""

import sys

from gpuledger.cli import main

sys.exit(main())
