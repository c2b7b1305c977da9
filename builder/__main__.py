"""Entry point for `python -m builder`."""

import sys

from builder.gcpolicy import quiet_imports

with quiet_imports():  # the modules' objects live as long as the process (builder.gcpolicy)
    from builder.cli import main

sys.exit(main())
