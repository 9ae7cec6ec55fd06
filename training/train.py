"""SageMaker entrypoint of the fine-tuning platform (`sagemaker_program=train.py`).

The training toolkit runs ``python train.py --name value ...`` in the unpacked
``sourcedir.tar.gz``; torchrun and mpirun (smddp) start one copy per GPU.
``python train.py --help`` lists the hyperparameters.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ftl_train.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
