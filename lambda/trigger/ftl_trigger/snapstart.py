"""What Lambda SnapStart (context ``ftl:snapStart``) changes for the trigger.

With SnapStart, Lambda runs the module-level set-up once when a version is published, snapshots
the process and resumes copies of it. For the trigger that means:

* Clients built at import need no re-creation: no request is made before the snapshot, so no
  connection is open in it, and botocore resolves credentials lazily from what the restored
  environment provides (refreshable credentials are renewed before they expire).
* Nothing random is drawn at import: job-name suffixes come from ``secrets`` per request
  (``Runtime.random_hex``), so restored copies never share one. ``random``'s state *is* in the
  snapshot (botocore's retry jitter uses it), so it is re-seeded after each restore.

``snapshot_restore_py`` exists only in Lambda's Python 3.12+ runtimes; elsewhere nothing is
registered.
"""

from __future__ import annotations

import random


def reseed_after_restore() -> None:
    random.seed()


def register_restore_hooks() -> bool:
    """Register the after-restore hook when the runtime offers SnapStart hooks."""
    try:
        from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]
    except ImportError:
        return False
    register_after_restore(reseed_after_restore)
    return True
