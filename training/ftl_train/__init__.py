"""The fine-tuning entrypoint's package (shipped inside sourcedir.tar.gz with train.py).

Self-contained: imports only the standard library, torch, transformers, datasets
and numpy, never the rest of the repository.
"""

__all__ = ["main"]


def main(argv=None, environ=None, callbacks=()) -> int:  # noqa: ANN001
    from .run import main as _main

    return _main(argv, environ, callbacks)
