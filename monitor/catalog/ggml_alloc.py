"""ggml's graph allocator, replayed: the compute buffer a graph needs (``ggml/src/ggml-alloc.c``).

llama.cpp hands each graph it reserves to ``ggml_gallocr``, which walks the nodes in order,
places each result in a buffer with a best-fit free list (``ggml_dyn_tallocr``; a parent's
memory taken over in place when the op allows it and nothing else reads the parent), and
frees a result once its last consumer has run (a view keeps its source alive). The compute
buffer llama-server reports is the high-water mark of that walk; ``reserve`` replays it.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.catalog.ggml_graph import INPLACE_OPS, Graph, Tensor


class _FreeList:
    """ggml_dyn_tallocr with one chunk: best fit among free blocks, else the last block, which may grow."""

    def __init__(self, alignment: int):
        self.alignment = alignment
        self.blocks: list[list[int]] = [[0, 1 << 62]]  # [offset, size], sorted by offset
        self.max_size = 0

    def align(self, size: int) -> int:
        return -(-size // self.alignment) * self.alignment

    def alloc(self, size: int) -> int:
        size = self.align(size)
        best, best_size = -1, None
        for i, (_offset, block_size) in enumerate(self.blocks[:-1]):
            if block_size >= size and (best_size is None or block_size <= best_size):
                best, best_size = i, block_size
        if best < 0:
            best = len(self.blocks) - 1
        block = self.blocks[best]
        address = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.blocks[best]
        self.max_size = max(self.max_size, address + size)
        return address

    def free(self, address: int, size: int) -> None:
        size = self.align(size)
        for i, block in enumerate(self.blocks):
            if block[0] + block[1] == address:
                block[1] += size
                if i + 1 < len(self.blocks) and block[0] + block[1] == self.blocks[i + 1][0]:
                    block[1] += self.blocks[i + 1][1]
                    del self.blocks[i + 1]
                return
            if address + size == block[0]:
                block[0], block[1] = address, block[1] + size
                if i > 0 and self.blocks[i - 1][0] + self.blocks[i - 1][1] == block[0]:
                    self.blocks[i - 1][1] += block[1]
                    del self.blocks[i]
                return
        position = next((i for i, block in enumerate(self.blocks) if block[0] >= address), len(self.blocks))
        self.blocks.insert(position, [address, size])


@dataclass
class _State:
    children: int = 0
    views: int = 0
    allocated: bool = False
    address: int = -1


def _same_layout(a: Tensor, b: Tensor) -> bool:
    return a.type == b.type and a.ne == b.ne and a.nb == b.nb


def reserve(graph: Graph, alignment: int = 32) -> int:
    """The buffer ggml_gallocr_reserve sizes for ``graph`` (bytes): ggml_gallocr_alloc_graph_impl's walk."""
    states: dict[int, _State] = {}
    space = _FreeList(alignment)

    def state(t: Tensor) -> _State:
        return states.setdefault(id(t), _State())

    def allocate(t: Tensor) -> None:
        s = state(t)
        if t.external or s.allocated or t.view_src is not None:
            return
        s.allocated = True
        if t.op in INPLACE_OPS and _reuse_parent(t, s):
            return
        s.address = space.alloc(t.nbytes)

    def _reuse_parent(t: Tensor, s: _State) -> bool:
        for parent in t.src:
            if parent is None or not state(parent).allocated or not _same_layout(t, parent):
                continue
            if parent.is_output or (parent.view_src is not None and parent.view_src.is_output):
                continue
            p = state(parent)
            if p.children != 1 or p.views != 0:
                continue
            if parent.view_src is not None:
                source = state(parent.view_src)
                if source.views == 1 and source.children == 0:
                    s.address, p.allocated, source.allocated = source.address, False, False
                    _free_extra(t, parent.view_src, source.address)
                    return True
                continue
            s.address, p.allocated = p.address, False
            _free_extra(t, parent, p.address)
            return True
        return False

    def _free_extra(t: Tensor, parent: Tensor, address: int) -> None:
        """ggml_gallocr_free_extra_space: a smaller result hands back the tail of its parent's block."""
        kept, held = space.align(t.nbytes), space.align(parent.nbytes)
        if held > kept:
            space.free(address + kept, held - kept)

    def release(t: Tensor) -> None:
        if t.is_output:
            return
        s = state(t)
        space.free(s.address, t.nbytes)
        s.allocated = False

    for leaf in graph.leafs:
        allocate(leaf)
    for node in graph.nodes:
        if node.view_src is not None and node.op != "NONE":
            state(node.view_src).views += 1
        if node.is_input:
            allocate(node)
        for parent in node.src:
            if parent is not None:
                state(parent).children += 1
                if parent.is_input:
                    allocate(parent)
    for node in graph.nodes:
        for parent in node.src:
            if parent is not None:
                allocate(parent)
        allocate(node)
        for parent in node.src:
            if parent is None:
                continue
            p = state(parent)
            p.children -= 1
            if p.children or p.views:
                continue
            if parent.view_src is not None:
                source = state(parent.view_src)
                source.views -= 1
                if source.views == 0 and source.children == 0 and source.allocated:
                    release(parent.view_src)
            elif p.allocated:
                release(parent)
    return space.max_size
