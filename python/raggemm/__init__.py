"""raggemm: grouped matrix multiplication (ragged dot) for MoE training on CPU.

numpy API: gmm, tgmm (and the quantization and plan helpers). JAX:
``raggemm.jax.ragged_dot`` (imported on demand; the numpy API needs no jax).
Bad input raises ``raggemm.Error``, a ``ValueError`` naming the argument.
"""

from ._arrays import Error
from ._ops import gmm, tgmm
from ._plan import PassConfig, Plan, plan
from ._quant import Quantized, dequantize, quantize

__version__ = "0.1.0"
__all__ = ["Error", "PassConfig", "Plan", "Quantized", "dequantize", "gmm", "plan", "quantize",
           "tgmm"]
