"""raggemm: grouped matrix multiplication (ragged dot) for MoE training on CPU.

numpy API: gmm, tgmm (and the quantization and plan helpers); tune, the
autotuner into the tune cache; trace and trace_span, a Trace Event Format
trace of the GMM calls a block runs. PyTorch: ``raggemm.torch`` (grouped_mm,
ragged_dot). JAX: ``raggemm.jax`` (ragged_dot, ragged_dot_general,
quantized_ragged_dot). The torch and jax modules are imported on demand;
the numpy API needs neither. Calls that leave tiles and kernel unset take
them from the tune cache, else the heuristic, as the CLI does.
Bad input raises ``raggemm.Error``, a ``ValueError`` naming the argument.
"""

from ._arrays import Error
from ._ops import gmm, tgmm
from ._plan import PassConfig, Plan, plan, resolve_call
from ._quant import Quantized, dequantize, quantize
from ._trace import trace, trace_span
from ._tune import default_tune_cache_path, tune

__version__ = "0.1.0"
__all__ = ["Error", "PassConfig", "Plan", "Quantized", "default_tune_cache_path", "dequantize",
           "gmm", "plan", "quantize", "resolve_call", "tgmm", "trace", "trace_span",
           "tune"]
