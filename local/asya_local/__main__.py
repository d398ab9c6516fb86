"""``python -m asya_local``: the ``asya`` command line."""

from __future__ import annotations

import sys

from asya_local.cli import main

sys.exit(main())
