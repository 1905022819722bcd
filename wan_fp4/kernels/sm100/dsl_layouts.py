"""Evaluate CuTe DSL scale-factor layouts at given coordinates (used by the tests to check pack.py).

The layouts are static, so evaluating them while the DSL traces a @cute.jit function yields
plain integers; the function is compiled for sm_100a only to trigger the trace.
"""
import cutlass
import cutlass.cute as cute
import cutlass.utils.blockscaled_layout as bs

_result: list = []


@cute.jit
def _eval_sf(shape: cutlass.Constexpr, vec: cutlass.Constexpr, coords: cutlass.Constexpr):
    layout = bs.tile_atom_to_shape_SF(shape, vec)
    _result[:] = [layout(c) for c in coords]


@cute.jit
def _eval_atom(vec: cutlass.Constexpr, coords: cutlass.Constexpr):
    layout = bs.BlockScaledBasicChunk(vec).layout
    _result[:] = [layout(((m % 32, m // 32), (k % vec, k // vec))) for m, k in coords]


def sf_layout_offsets(shape, vec, coords):
    cute.compile(_eval_sf, tuple(shape), vec, tuple(coords), options="--gpu-arch sm_100a")
    return [int(x) for x in _result]


def sf_atom_offsets(vec, coords):
    cute.compile(_eval_atom, vec, tuple(coords), options="--gpu-arch sm_100a")
    return [int(x) for x in _result]
