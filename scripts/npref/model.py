# SPDX-License-Identifier: MIT
"""npref.model: Model, a dumped model whose forward() is the float64 re-run
of its block (npref.blocks, or npref.adaln for dit)."""

from .adaln import forward_dit
from .blocks import BLOCKS
from .graph import Graph


class Model(Graph):
    """One dumped model: tensors + config; forward() is the float64 re-run."""

    def forward(self):
        if self.cfg.block == "dit":
            return forward_dit(self)
        # Cfg admits only dit and the blocks of BLOCKS
        return BLOCKS[self.cfg.block](self)
