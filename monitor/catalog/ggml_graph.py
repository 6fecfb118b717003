"""A small model of ggml's compute graphs: the shapes llama.cpp's graphs are made of.

Tensors carry ggml's shapes, strides, types and view relations as ``ggml.c`` sets them
for each op, and ``Graph.expand`` orders nodes as ``ggml_build_forward_expand`` does
(depth first, sources left to right). ``ggml_alloc.reserve`` then sizes a graph's buffer
the way ggml's allocator does. Only sizes are modelled: nothing is computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# (bytes per block, values per block) of the types a compute graph meets.
TYPE_SIZES = {
    "f32": (4, 1), "f16": (2, 1), "bf16": (2, 1), "i32": (4, 1), "i64": (8, 1),
    "q8_0": (34, 32), "q4_0": (18, 32), "q4_1": (20, 32), "iq4_nl": (18, 32), "q5_0": (22, 32), "q5_1": (24, 32),
}  # fmt: skip
# ggml_op_can_inplace: ops whose result may take over a parent's memory.
INPLACE_OPS = frozenset(
    {"FILL", "SCALE", "ADD", "ADD_ID", "ADD1", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "UNARY", "ROPE",
     "RMS_NORM", "CLAMP", "SOFT_MAX"}
)  # fmt: skip


def is_quantized(type_name: str) -> bool:
    return TYPE_SIZES[type_name][1] > 1


class Tensor:
    """Shape (``ne``, four dims), strides (``nb``), type, the op that makes it and its sources."""

    __slots__ = ("type", "ne", "nb", "op", "src", "view_src", "is_input", "is_output", "external", "name")

    def __init__(self, type_name: str, ne, op: str = "NONE", src=(), view_src=None, nb=None, name: str = ""):
        self.type = type_name
        self.ne = tuple(ne) + (1,) * (4 - len(ne))
        self.nb = tuple(nb) if nb is not None else _contiguous_strides(type_name, self.ne)
        self.op = op
        self.src = tuple(src)
        self.view_src = view_src
        self.is_input = self.is_output = False
        self.external = False  # weights and caches: memory of their own, never in the compute buffer
        self.name = name

    @property
    def nbytes(self) -> int:
        """ggml_nbytes: what the allocator reserves for this tensor (strides included)."""
        if any(n <= 0 for n in self.ne):
            return 0
        size, block = TYPE_SIZES[self.type]
        first = size + (self.ne[0] - 1) * self.nb[0] if block == 1 else self.ne[0] * self.nb[0] // block
        return first + sum((n - 1) * stride for n, stride in zip(self.ne[1:], self.nb[1:], strict=True))

    @property
    def contiguous(self) -> bool:
        return self.nb == _contiguous_strides(self.type, self.ne)

    def __repr__(self) -> str:  # for debugging a port against GGML_SCHED_DEBUG=2 dumps
        return f"{self.op}:{self.name}{list(self.ne)}"


def _contiguous_strides(type_name: str, ne) -> tuple[int, ...]:
    size, block = TYPE_SIZES[type_name]
    strides = [size, size * (ne[0] // block)]
    for dim in (1, 2):
        strides.append(strides[-1] * ne[dim])
    return tuple(strides)


# --- tensors and ops, as ggml.c shapes them ---------------------------------------------------


def weight(type_name: str, *ne: int) -> Tensor:
    t = Tensor(type_name, ne)
    t.external = True
    return t


def input_tensor(type_name: str, *ne: int, name: str = "") -> Tensor:
    t = Tensor(type_name, ne, name=name)
    t.is_input = True
    return t


def _result(a: Tensor, op: str, src, type_name: str | None = None, ne=None) -> Tensor:
    return Tensor(type_name or a.type, ne or a.ne, op, src)


def _view(a: Tensor, op: str, ne, nb, src=None) -> Tensor:
    return Tensor(a.type, ne, op, src or (a,), a.view_src or a, nb)


def view(a: Tensor, ne, nb=None) -> Tensor:
    """ggml_view_Nd: ``nb`` gives nb1.. (nb0 is the type's); offsets do not change sizes."""
    ne = tuple(ne) + (1,) * (4 - len(ne))
    strides = list(_contiguous_strides(a.type, ne))
    for dim, stride in enumerate(nb or (), start=1):
        strides[dim] = stride
    for dim in range(len(nb or ()) + 1, 4):  # ggml_view_Nd fills higher strides from the last given
        strides[dim] = strides[dim - 1] * ne[dim - 1]
    return _view(a, "VIEW", ne, strides)


def reshape(a: Tensor, *ne: int) -> Tensor:
    return _view(a, "RESHAPE", ne, None)  # contiguous strides


def permute(a: Tensor, a0: int, a1: int, a2: int, a3: int) -> Tensor:
    ne, nb = [0] * 4, [0] * 4
    for source, axis in enumerate((a0, a1, a2, a3)):
        ne[axis], nb[axis] = a.ne[source], a.nb[source]
    return _view(a, "PERMUTE", ne, nb)


def transpose(a: Tensor) -> Tensor:
    return _view(a, "TRANSPOSE", (a.ne[1], a.ne[0], a.ne[2], a.ne[3]), (a.nb[1], a.nb[0], a.nb[2], a.nb[3]))


def cont(a: Tensor, *ne: int) -> Tensor:
    return _result(a, "CONT", (a,), ne=ne)


def dup(a: Tensor) -> Tensor:
    return _result(a, "DUP", (a,))


def cast(a: Tensor, type_name: str) -> Tensor:
    return _result(a, "CPY", (a,), type_name)


def unary(a: Tensor, op: str = "UNARY") -> Tensor:
    """Element-wise on one tensor (silu, sigmoid, softplus, scale, rms_norm, soft_max, clamp, rope...)."""
    return _result(a, op, (a,), ne=a.ne)


def inplace(a: Tensor, op: str) -> Tensor:
    return _view(a, op, a.ne, a.nb)


def binary(a: Tensor, b: Tensor, op: str) -> Tensor:
    return _result(a, op, (a, b), ne=a.ne)


def rope(a: Tensor, positions: Tensor) -> Tensor:
    return _result(a, "ROPE", (a, positions), ne=a.ne)


def rms_norm(a: Tensor) -> Tensor:
    return unary(a, "RMS_NORM")


def glu(a: Tensor, b: Tensor) -> Tensor:
    return _result(a, "GLU", (a, b), ne=a.ne)


def get_rows(a: Tensor, rows: Tensor) -> Tensor:
    return _result(a, "GET_ROWS", (a, rows), "i32" if a.type == "i32" else "f32", (a.ne[0], *rows.ne[:3]))


def set_rows(a: Tensor, b: Tensor, rows: Tensor) -> Tensor:
    return _view(a, "SET_ROWS", a.ne, a.nb, (b, rows, a))


def cpy(a: Tensor, b: Tensor) -> Tensor:
    return _view(b, "CPY", b.ne, b.nb, (a, b))


def mul_mat(a: Tensor, b: Tensor) -> Tensor:
    return _result(b, "MUL_MAT", (a, b), "f32", (a.ne[1], b.ne[1], b.ne[2], b.ne[3]))


def mul_mat_id(experts: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    return _result(b, "MUL_MAT_ID", (experts, b, ids), "f32", (experts.ne[1], ids.ne[0], b.ne[2], 1))


def concat(a: Tensor, b: Tensor, dim: int) -> Tensor:
    ne = list(a.ne)
    ne[dim] += b.ne[dim]
    return _result(a, "CONCAT", (a, b), ne=ne)


def sum_rows(a: Tensor) -> Tensor:
    return _result(a, "SUM_ROWS", (a,), ne=(1, *a.ne[1:]))


def argsort_top_k(a: Tensor, k: int) -> Tensor:
    order = _result(a, "ARGSORT", (a,), "i32")
    return view(order, (k, *order.ne[1:]), order.nb[1:])


def ssm_conv(sx: Tensor, kernel: Tensor) -> Tensor:
    return _result(sx, "SSM_CONV", (sx, kernel), "f32", (kernel.ne[1], sx.ne[0] - kernel.ne[0] + 1, sx.ne[2]))


def gated_delta_net(q, k, v, g, beta, state, snapshots: int) -> Tensor:
    s_v, heads, tokens, seqs = v.ne
    ne = (s_v * heads, tokens * seqs + snapshots * s_v * seqs)
    return _result(v, "GATED_DELTA_NET", (q, k, v, g, beta, state), "f32", ne)


def flash_attn_ext(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    return _result(q, "FLASH_ATTN_EXT", (q, k, v, mask), "f32", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]))


# --- graph ------------------------------------------------------------------------------------


@dataclass
class Graph:
    nodes: list[Tensor] = field(default_factory=list)
    leafs: list[Tensor] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)

    def expand(self, tensor: Tensor) -> None:
        """ggml_build_forward_expand: depth first, sources in order, each tensor once."""
        stack = [(tensor, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                if id(node) in self._seen:
                    continue
                self._seen.add(id(node))
            if index < len(node.src):
                stack.append((node, index + 1))
                if node.src[index] is not None and id(node.src[index]) not in self._seen:
                    stack.append((node.src[index], 0))
                continue
            (self.leafs if node.op == "NONE" else self.nodes).append(node)
