"""Benchmarks (``make bench``): performance claims as ratios against baselines run alongside.

Each benchmark is a module with ``NAME``, ``DESCRIPTION`` and ``main(argv) -> int``;
:mod:`benchmarks.run` dispatches to them and each writes its own section of
``benchmarks/RESULTS.md`` (:mod:`benchmarks.results`).
"""
