"""Benchmark results: parsers for nccl-tests, perftest, ``dcgmi diag`` and the ResNet-50 benchmark's lines,
floors per hardware class (``floors.yml``) and the judge that turns both into named verdicts.

Pure Python, no I/O except reading the files a caller names; ``railforge bench judge`` is the command line.
"""
