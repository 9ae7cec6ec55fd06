"""Benchmarks: each measures the platform and its baseline in the same run and prints a ratio.

``python -m bench.run_all`` (``make bench``) runs them all and writes ``bench/RESULTS.md``.
"""
