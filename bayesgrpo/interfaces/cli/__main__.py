"""``python -m bayesgrpo.interfaces.cli``: the ``bayesgrpo`` command."""

import sys

from bayesgrpo.interfaces.cli import main

sys.exit(main())
