"""``python -m adlrec.cli``."""

import sys

from adlrec.cli import main

sys.exit(main())
