"""``python -m ftl_client``: the same as the ``ftl`` console script."""

import sys

from ftl_client.cli import main

sys.exit(main())
