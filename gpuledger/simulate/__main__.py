"""``python -m gpuledger.simulate --out DIR ...`` (same arguments as ``gpuledger simulate``)."""

import sys

from gpuledger.simulate.cli_args import main

sys.exit(main())
