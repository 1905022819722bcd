"""Inline-PTX helpers for the sm100a Direct-P FP4 kernel (CuTe DSL device code).

Every helper pins its rounding explicitly (".rn" instructions are never contracted into FMAs by
ptxas), because the kernel must reproduce the reference's FP32 arithmetic step for step
(docs/NUMERICS.md, direct-p-fp4). Only importable where nvidia-cutlass-dsl is installed.
"""
from __future__ import annotations

from cutlass import Float32, Int32, Uint32
from cutlass._mlir import ir
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


def _asm(ret_type, args, text: str, constraints: str):
    return llvm.inline_asm(
        ret_type,
        args,
        text,
        constraints,
        has_side_effects=False,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


@dsl_user_op
def block_exponent(block_max: Float32, m: Float32, c: Float32, nearest_bias: Float32, *, loc=None,
                   ip=None) -> Int32:
    """e = clamp(floor(fl(fl(fl(max - m) * c) + bias)), -126, 127): the P block's E8M0 exponent.

    m is the row reference in raw score units (0 shiftless; the large-logit guard's anchor max
    + M ln2 otherwise): fl(max - 0) = max, so one code path serves both maps. u = e + 127 then
    lies in [1, 254] as DESIGN §3 requires. A block with no valid key has max = -inf, which the
    clamp maps to e = -126 (its codes are all 0 anyway).
    """
    return Int32(
        _asm(
            T.i32(),
            [Float32(block_max).ir_value(loc=loc, ip=ip), Float32(m).ir_value(loc=loc, ip=ip),
             Float32(c).ir_value(loc=loc, ip=ip), Float32(nearest_bias).ir_value(loc=loc, ip=ip)],
            "{\n.reg .f32 g;\n"
            "sub.rn.f32 g, $1, $2;\n"
            "mul.rn.f32 g, g, $3;\n"
            "add.rn.f32 g, g, $4;\n"
            "cvt.rmi.f32.f32 g, g;\n"
            "max.f32 g, g, 0fC2FC0000;\n"  # -126
            "min.f32 g, g, 0f42FE0000;\n"  # 127
            "cvt.rzi.s32.f32 $0, g;\n}",
            "=r,f,f,f,f",
        )
    )


@dsl_user_op
def row_offset(m: Float32, c: Float32, log2_6: Float32, *, loc=None, ip=None) -> Float32:
    """fma(-m, c, log2_6): the row's part of qb = fl(fma(-m, c, log2 6) - e), once per row.

    m = 0 (shiftless) gives log2_6 exactly. The neg is exact, so this is the reference's
    fl(-m c + log2 6) with one rounding.
    """
    return Float32(
        _asm(
            T.f32(),
            [Float32(m).ir_value(loc=loc, ip=ip), Float32(c).ir_value(loc=loc, ip=ip),
             Float32(log2_6).ir_value(loc=loc, ip=ip)],
            "{\n.reg .f32 nm;\n"
            "neg.f32 nm, $1;\n"
            "fma.rn.f32 $0, nm, $2, $3;\n}",
            "=f,f,f,f",
        )
    )


@dsl_user_op
def affine_bias(e: Int32, row_off: Float32, a: Float32, b: Float32, *, loc=None, ip=None) -> Float32:
    """fma(A, fl(row_off - e), B) with row_off = fma(-m, c, log2 6) (row_offset): the
    per-block constant of y = A x + B, x = (s - m) c + log2 6 - e."""
    return Float32(
        _asm(
            T.f32(),
            [Int32(e).ir_value(loc=loc, ip=ip), Float32(row_off).ir_value(loc=loc, ip=ip),
             Float32(a).ir_value(loc=loc, ip=ip), Float32(b).ir_value(loc=loc, ip=ip)],
            "{\n.reg .f32 fe, qb;\n"
            "cvt.rn.f32.s32 fe, $1;\n"
            "sub.rn.f32 qb, $2, fe;\n"
            "fma.rn.f32 $0, $3, qb, $4;\n}",
            "=f,r,f,f,f",
        )
    )


@dsl_user_op
def pow2_e8m0(e: Int32, *, loc=None, ip=None) -> Float32:
    """2^e exactly for e in [-127, 127], the value of E8M0 byte e + 127 (no ex2.approx).

    Built from the exponent bits; e = -127 (byte 0) is the FP32 subnormal 2^-127.
    """
    return Float32(
        _asm(
            T.f32(),
            [Int32(e).ir_value(loc=loc, ip=ip)],
            "{\n.reg .b32 t;\n.reg .pred z;\n"
            "add.s32 t, $1, 127;\n"
            "shl.b32 t, t, 23;\n"
            "setp.eq.s32 z, $1, -127;\n"
            "selp.b32 $0, 4194304, t, z;\n}",  # 0x00400000 = 2^-127
            "=f,r",
        )
    )


@dsl_user_op
def pack_e2m1x8(y0, y1, y2, y3, y4, y5, y6, y7, *, loc=None, ip=None) -> Uint32:
    """Eight FP32 values -> eight E2M1 codes in one word, element 0 in the low nibble.

    cvt.rn.satfinite.relu.e2m1x2.f32 is RNE onto {0,.5,...,6}, saturating at 6, with negative
    inputs (and NaN) clamped to +0: exactly E2M1_rne_satfinite(max(y, 0)). The second source
    operand lands in the low nibble, so pairs are passed (odd, even).
    """
    ys = [Float32(v).ir_value(loc=loc, ip=ip) for v in (y0, y1, y2, y3, y4, y5, y6, y7)]
    return Uint32(
        _asm(
            T.i32(),
            ys,
            "{\n.reg .b8 b0, b1, b2, b3;\n"
            "cvt.rn.satfinite.relu.e2m1x2.f32 b0, $2, $1;\n"
            "cvt.rn.satfinite.relu.e2m1x2.f32 b1, $4, $3;\n"
            "cvt.rn.satfinite.relu.e2m1x2.f32 b2, $6, $5;\n"
            "cvt.rn.satfinite.relu.e2m1x2.f32 b3, $8, $7;\n"
            "mov.b32 $0, {b0, b1, b2, b3};\n}",
            "=r,f,f,f,f,f,f,f,f",
        )
    )


@dsl_user_op
def e2m1x32_sum(w0: Uint32, w1: Uint32, w2: Uint32, w3: Uint32, *, loc=None, ip=None) -> Float32:
    """Sum of the 32 E2M1 values packed in four words, exactly.

    Decoded back with the native cvt.rn.f16x2.e2m1x2 and added as f16x2: each half sums 16
    values <= 6 on a 0.5 grid (at most 96), well inside f16's exact integer range.
    """
    ws = [Uint32(w).ir_value(loc=loc, ip=ip) for w in (w0, w1, w2, w3)]
    lines = ["{", ".reg .b8 c<16>;", ".reg .b32 h<16>;", ".reg .b16 lo, hi;", ".reg .f32 flo, fhi;"]
    for i in range(4):
        lines.append(f"mov.b32 {{c{4*i}, c{4*i+1}, c{4*i+2}, c{4*i+3}}}, ${i + 1};")
    for i in range(16):
        lines.append(f"cvt.rn.f16x2.e2m1x2 h{i}, c{i};")
    step = 1
    while step < 16:
        for i in range(0, 16, 2 * step):
            lines.append(f"add.rn.f16x2 h{i}, h{i}, h{i + step};")
        step *= 2
    lines += ["mov.b32 {lo, hi}, h0;", "cvt.f32.f16 flo, lo;", "cvt.f32.f16 fhi, hi;",
              "add.rn.f32 $0, flo, fhi;", "}"]
    return Float32(_asm(T.f32(), ws, "\n".join(lines), "=f,r,r,r,r"))


@dsl_user_op
def div_or_zero(a: Float32, d: Float32, *, loc=None, ip=None) -> Float32:
    """fl(a / d) correctly rounded (div.rn.f32, subnormals kept) where d > 0, else +0: the
    reference's where(denom > 0, acc / denom, 0)."""
    vals = [Float32(a).ir_value(loc=loc, ip=ip), Float32(d).ir_value(loc=loc, ip=ip)]
    text = ("{ .reg .pred p; .reg .f32 q;\n"
            "setp.gt.f32 p, $2, 0f00000000;\n"
            "div.rn.f32 q, $1, $2;\n"
            "selp.f32 $0, q, 0f00000000, p; }")
    return Float32(_asm(T.f32(), vals, text, "=f,f,f"))


@dsl_user_op
def tcgen05_fence_before_sync(*, loc=None, ip=None) -> None:
    """tcgen05.fence::before_thread_sync: make this thread's TMEM ld/st ordered before the
    mbarrier arrive that follows (PTX's rule for tcgen05 ops across threads)."""
    llvm.inline_asm(None, [], "tcgen05.fence::before_thread_sync;", "", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


@dsl_user_op
def tcgen05_fence_after_sync(*, loc=None, ip=None) -> None:
    """tcgen05.fence::after_thread_sync: order the tcgen05 ops that follow an mbarrier wait
    after the other threads' TMEM writes that the wait observed."""
    llvm.inline_asm(None, [], "tcgen05.fence::after_thread_sync;", "", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
