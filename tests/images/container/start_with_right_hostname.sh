#!/usr/bin/env bash
# The image matrix's copy of the training images' start script (ENTRYPOINT
# ["bash", "-m", "start_with_right_hostname.sh"], SageMaker passing "train"), written for
# the matrix. Same process tree: with "train" it runs the toolkit's train command as its
# child, not by exec; otherwise it evaluates its arguments. The image first compiles a
# gethostname() shim for the host name in resourceconfig.json and runs
# "LD_PRELOAD=<shim> train"; the matrix skips the compiler step (the toolkit shim resolves
# algo-N host names to loopback instead).
if [[ "$1" = "train" ]]; then
    train
else
    eval "$@"
fi
