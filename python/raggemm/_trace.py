"""raggemm.trace: a Trace Event Format JSON of the grouped matmuls a block of
Python code runs (numpy, torch and JAX entries alike), with spans for steps
and layers from raggemm.trace_span. Opens in Perfetto or chrome://tracing."""

from __future__ import annotations

import contextlib
import os

from . import _raggemm


@contextlib.contextmanager
def trace(path: str | os.PathLike, *, rank: int = 0):
    """Records every raggemm GMM call made in the block and writes the trace
    to ``path`` (atomically) when the block ends, even on an exception.

    The file follows the Trace Event Format: one process (pid = ``rank``,
    named "rank N"), one track per thread that called raggemm (JAX runs its
    custom calls on its own threads), complete ("X") events that nest per
    track: the spans of raggemm.trace_span hold the GMM events, whose args
    are pass, weight (the plan's, or the ``weight=`` label), kernel, tile_m,
    tile_k, tile_n and their sources (explicit, cache, heuristic), M, K, N, G
    (the weight's problem: x [M, K], w [G, K, N]), flops and gflops_per_s.
    One trace at a time per process.
    """
    _raggemm.trace_start(int(rank))
    try:
        yield
    finally:
        _raggemm.trace_stop(os.fspath(path))


@contextlib.contextmanager
def trace_span(name: str, **args):
    """A named slice of the open trace around the block (a training step, a
    layer), with ``args`` (str -> int, float, bool or str) attached: the GMM
    events of the block nest in it. Does nothing when no trace is open."""
    start = _raggemm.trace_clock_ns()
    try:
        yield
    finally:
        _raggemm.trace_span(str(name), start, args)
