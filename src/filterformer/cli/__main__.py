"""Run the command line as ``python -m filterformer.cli``."""

import sys

from . import main

sys.exit(main())
