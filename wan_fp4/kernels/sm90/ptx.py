"""Small inline-PTX helpers for the sm90 kernel.

Written as inline asm (no side effects, so the compiler may schedule them) because the exact
instruction matters for the numerics contract (docs/NUMERICS.md): a fused FMA with one rounding,
the magic-number round-to-nearest-even, byte packing by PRMT, the f16-subnormal rounding, and e4m3
conversion.
"""
from __future__ import annotations

from cutlass import Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


def _asm(ret, args, text, constraints):
    return llvm.inline_asm(
        ret, args, text, constraints, has_side_effects=False, is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


@dsl_user_op
def fma_f32(a, b, c, *, loc=None, ip=None) -> Float32:
    """fl(a*b + c) with a single rounding (never split into mul + add)."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c)]
    return Float32(_asm(T.f32(), vals, "fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f"))


@dsl_user_op
def fma_sat_f32(a, b, c, *, loc=None, ip=None) -> Float32:
    """min(max(fl(a*b + c), 0), 1) with a single rounding: FFMA.SAT (NaN -> 0)."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c)]
    return Float32(_asm(T.f32(), vals, "fma.rn.sat.f32 $0, $1, $2, $3;", "=f,f,f,f"))


@dsl_user_op
def mul_f32(a, b, *, loc=None, ip=None) -> Float32:
    """fl(a*b) kept as its own instruction (so it cannot be contracted into a later FMA)."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Float32(_asm(T.f32(), vals, "mul.rn.f32 $0, $1, $2;", "=f,f,f"))


@dsl_user_op
def ex2_approx(a, *, loc=None, ip=None) -> Float32:
    vals = [Float32(a).ir_value(loc=loc, ip=ip)]
    return Float32(_asm(T.f32(), vals, "ex2.approx.ftz.f32 $0, $1;", "=f,f"))


@dsl_user_op
def lg2_approx(a, *, loc=None, ip=None) -> Float32:
    vals = [Float32(a).ir_value(loc=loc, ip=ip)]
    return Float32(_asm(T.f32(), vals, "lg2.approx.ftz.f32 $0, $1;", "=f,f"))


def _pack4(floats, text, loc, ip) -> Int32:
    """Four floats ($1..$4) -> one 32-bit register ($0) by the inline PTX `text`."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in floats]
    return Int32(_asm(T.i32(), vals, text, "=r,f,f,f,f"))


@dsl_user_op
def pack_low_bytes(a, b, c, d, *, loc=None, ip=None) -> Int32:
    """Byte 0 of each of four 32-bit registers, packed low-to-high (a lowest): 3 PRMT.

    Used on floats r = t + 1.5*2^23 whose low mantissa byte is rne(t) (the E4M3 byte).
    """
    text = (
        "{ .reg .b32 lo, hi;\n"
        "prmt.b32 lo, $1, $2, 0x0040;\n"
        "prmt.b32 hi, $3, $4, 0x0040;\n"
        "prmt.b32 $0, lo, hi, 0x5410; }"
    )
    return _pack4((a, b, c, d), text, loc, ip)


@dsl_user_op
def pack_f16_low_bytes(a, b, c, d, *, loc=None, ip=None) -> Int32:
    """Low byte of cvt.rn.relu.f16(x) for four floats, packed low-to-high (a lowest): 2 F2FP + 1 PRMT.

    Used on x = t * 2^-24: f16 subnormals are multiples of 2^-24, so the f16 bits are rne(t) for
    t in [0, 2048) (the E4M3 byte for t <= 120.5), relu maps t < 0 to 0 (NaN stays NaN: 0x7fff).
    """
    text = (
        "{ .reg .b32 lo, hi;\n"
        "cvt.rn.relu.f16x2.f32 lo, $2, $1;\n"
        "cvt.rn.relu.f16x2.f32 hi, $4, $3;\n"
        "prmt.b32 $0, lo, hi, 0x6420; }"
    )
    return _pack4((a, b, c, d), text, loc, ip)


@dsl_user_op
def pack_e4m3x4(a, b, c, d, *, loc=None, ip=None) -> Int32:
    """E4M3_rne_satfinite of four floats, packed low-to-high (a lowest)."""
    text = (
        "{ .reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n"
        "cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\n"
        "mov.b32 $0, {lo, hi}; }"
    )
    return _pack4((a, b, c, d), text, loc, ip)


@dsl_user_op
def cvt_f16x2_relu(a, b, *, loc=None, ip=None) -> Int32:
    """cvt.rn.relu.f16x2.f32: a in the low half, b in the high (1 F2FP)."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Int32(_asm(T.i32(), vals, "cvt.rn.relu.f16x2.f32 $0, $2, $1;", "=r,f,f"))


@dsl_user_op
def cvt_bf16x2(a, b, *, loc=None, ip=None) -> Int32:
    """cvt.rn.bf16x2.f32: a in the low half, b in the high (1 F2FP)."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Int32(_asm(T.i32(), vals, "cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f"))


@dsl_user_op
def low_bytes_of_halves(lo, hi, *, loc=None, ip=None) -> Int32:
    """The low byte of each 16-bit half of lo and hi, packed low-to-high (1 PRMT)."""
    vals = [Int32(x).ir_value(loc=loc, ip=ip) for x in (lo, hi)]
    return Int32(_asm(T.i32(), vals, "prmt.b32 $0, $1, $2, 0x6420;", "=r,r,r"))


@dsl_user_op
def max_f16x2(a, b, *, loc=None, ip=None) -> Int32:
    """max.f16x2 of two packed words (1 HMNMX2)."""
    vals = [Int32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Int32(_asm(T.i32(), vals, "max.f16x2 $0, $1, $2;", "=r,r,r"))


@dsl_user_op
def f16x2_max_f32(a, *, loc=None, ip=None) -> Float32:
    """The larger of a packed word's two f16 halves, as an FP32 value (exact)."""
    vals = [Int32(a).ir_value(loc=loc, ip=ip)]
    text = ("{ .reg .b16 l, h; .reg .f32 x, y;\n"
            "mov.b32 {l, h}, $1;\n"
            "cvt.f32.f16 x, l;\n"
            "cvt.f32.f16 y, h;\n"
            "max.f32 $0, x, y; }")
    return Float32(_asm(T.f32(), vals, text, "=f,r"))


@dsl_user_op
def f16x2_splat(a, *, loc=None, ip=None) -> Int32:
    """cvt.rn.f16x2.f32 of a into both halves (1 F2FP)."""
    vals = [Float32(a).ir_value(loc=loc, ip=ip)]
    return Int32(_asm(T.i32(), vals, "cvt.rn.f16x2.f32 $0, $1, $1;", "=r,f"))


@dsl_user_op
def add_f16x2(a, b, *, relu=False, loc=None, ip=None) -> Int32:
    """fl16(a + b) per f16 half (relu: max with 0): fma.rn{.relu}.f16x2 with the multiplier 1
    (1 HFMA2)."""
    vals = [Int32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    text = ("{ .reg .b32 one;\n"
            "mov.b32 one, 0x3C003C00;\n"
            f"fma.rn{'.relu' if relu else ''}.f16x2 $0, $1, one, $2; }}")
    return Int32(_asm(T.i32(), vals, text, "=r,r,r"))


@dsl_user_op
def f32_bits(a, *, loc=None, ip=None) -> Int32:
    """The bits of an FP32 value as an Int32 (mov.b32: no conversion)."""
    vals = [Float32(a).ir_value(loc=loc, ip=ip)]
    return Int32(_asm(T.i32(), vals, "mov.b32 $0, $1;", "=r,f"))


@dsl_user_op
def bits_f32(a, *, loc=None, ip=None) -> Float32:
    """An Int32's bits read as an FP32 value (mov.b32: no conversion)."""
    vals = [Int32(a).ir_value(loc=loc, ip=ip)]
    return Float32(_asm(T.f32(), vals, "mov.b32 $0, $1;", "=f,r"))


@dsl_user_op
def max_nan_bf16x2(a, b, *, loc=None, ip=None) -> Int32:
    """max.NaN.bf16x2 per half: a maximum over BF16 pairs that keeps a NaN (1 HMNMX2)."""
    vals = [Int32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Int32(_asm(T.i32(), vals, "max.NaN.bf16x2 $0, $1, $2;", "=r,r,r"))


@dsl_user_op
def fmax_nan(a, b, *, loc=None, ip=None) -> Float32:
    """max.NaN.f32: the larger of two floats, NaN if either is (the hardware max drops a NaN)."""
    vals = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b)]
    return Float32(_asm(T.f32(), vals, "max.NaN.f32 $0, $1, $2;", "=f,f,f"))


def bf16x2_f32(w) -> tuple[Float32, Float32]:
    """A BF16 pair's halves (low first) widened to FP32 exactly: their bits moved up (1 SHF, 1 LOP)."""
    return bits_f32(w << 16), bits_f32(w & Int32(-65536))


def bf16x2_max_f32(w) -> Float32:
    """The larger of a BF16 pair's halves as an FP32 value (exact; a NaN kept)."""
    return fmax_nan(*bf16x2_f32(w))


def bf16x4_e4m3x4(w0, w1, inv) -> Int32:
    """E4M3_rne_satfinite(x * inv) of the four BF16 values in w0 (low half first) and w1, packed
    low-to-high: each widened to FP32 (bf16x2_f32), multiplied by inv in FP32 (a power of two:
    exact), then pack_e4m3x4 (4 LOP/SHF + 4 FMUL + 2 F2FP + 1 PRMT)."""
    return pack_e4m3x4(*(mul_f32(x, inv) for x in (*bf16x2_f32(w0), *bf16x2_f32(w1))))


@dsl_user_op
def cta_index_x_again(*, loc=None, ip=None) -> Int32:
    """%ctaid.x read by a volatile mov: values derived from it are computed afresh here instead of
    being kept live from an earlier read (which would hold registers through the main loop)."""
    return Int32(llvm.inline_asm(T.i32(), [], "mov.u32 $0, %ctaid.x;", "=r", has_side_effects=True,
                                 is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT))
