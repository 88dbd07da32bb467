"""Context parallelism for arbitrary masks over ``torch.distributed`` (NCCL):
``plan`` cuts the sequence into chunks and gives every rank the same number of tokens
and about the same number of visible query-key pairs; ``attention`` runs a rank's
shard, receiving only the K/V chunks its mask rows read (docs/distributed.md).

The planner and the mask descriptions need numpy only; ``attention`` needs torch."""

from ._masks import BlockLists, DenseRows, Intervals, TopK
from ._merge import merge_states, merge_states_numpy
from ._attention import Prepared, attention, gather_kv, high_priority_group, prepare
from ._plan import Plan, plan


__all__ = ["BlockLists", "DenseRows", "Intervals", "Plan", "Prepared", "TopK", "attention",
           "gather_kv", "high_priority_group", "merge_states", "merge_states_numpy", "plan",
           "prepare"]
