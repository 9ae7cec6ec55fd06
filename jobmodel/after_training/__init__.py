"""After training: what a job leaves besides its files (issue 27).

Holds: ``tracking`` (the platform's MLflow servers, ``ftl:mlflow``, and experiment names),
``tracking_job`` (whether a job is tracked, and the environment its entrypoint logs with) and
``registry`` (model package groups, the version a Completed job registers and its lineage) and
``archive`` (what a job's ``model.tar.gz`` holds: full model, LoRA adapter or merged model,
issue 36).

May import (within jobmodel): contract, templates, teams, money, _rules, instances.
"""
