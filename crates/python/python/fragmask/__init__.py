"""fragmask from Python: fragment-native packed attention masks, the layout
calculator and (on an H100) fragmask's attention, split-KV decode and lightning-decode
kernels.

CPU parts need numpy only; torch is imported only by the functions that use it
(``Mask.to_flex_block_mask``, ``attention``, ``decode``, ``lightning_decode``).
"""

import sys as _sys

from . import _fragmask
from . import _device  # noqa: F401  (claims the extension's device API first)
from ._layout import Layout, layout
from ._mask import BlockLists, Mask
from ._ops import AttentionPlan, DecodePlan, attention, decode, lightning_decode, warmup

if "torch" in _sys.modules:
    # torch is loaded already: register the ops now, so that code traced by
    # torch.compile never meets a first call.
    from . import _ops

    _ops._torch()

__version__ = _fragmask.__version__
FileError = _fragmask.FileError
MAX_SEQLEN = _fragmask.MAX_SEQLEN

__all__ = [
    "AttentionPlan",
    "BlockLists",
    "DecodePlan",
    "FileError",
    "Layout",
    "MAX_SEQLEN",
    "Mask",
    "attention",
    "decode",
    "layout",
    "lightning_decode",
    "warmup",
    "__version__",
]
