"""``python -m adlrec``: the ``adlrec`` command, for an environment whose scripts are not on PATH."""

import sys

from adlrec.cli import main

sys.exit(main())
