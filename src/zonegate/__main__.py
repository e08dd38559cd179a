"""`python -m zonegate` runs the CLI."""

import sys

from zonegate.broker.cli import main

sys.exit(main())
