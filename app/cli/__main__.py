"""``python -m app.cli``: the ``ragtime`` command."""

import sys

from app.cli.commands import main

sys.exit(main())
