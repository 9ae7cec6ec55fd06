"""The evaluation job's entry point (issue 36): ``ftl_eval.main`` on the job's channels."""

import sys

from ftl_eval.main import main

if __name__ == "__main__":
    sys.exit(main())
