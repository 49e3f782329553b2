"""Fixed-point constants of libjpeg's islow IDCT (jidctint.c), shared by the golden model and the gateware.

Keeping them in one module means the model and the RTL cannot drift apart.
"""

CONST_BITS = 13
PASS1_BITS = 2

# FIX(x) = round(x * 2**CONST_BITS), exactly as jidctint.c spells them out.
FIX_0_298631336 = 2446
FIX_0_390180644 = 3196
FIX_0_541196100 = 4433
FIX_0_765366865 = 6270
FIX_0_899976223 = 7373
FIX_1_175875602 = 9633
FIX_1_501321110 = 12299
FIX_1_847759065 = 15137
FIX_1_961570560 = 16069
FIX_2_053119869 = 16819
FIX_2_562915447 = 20995
FIX_3_072711026 = 25172

#: Pass-1 outputs are descaled by this many bits (rounding to nearest, ties up).
PASS1_DESCALE = CONST_BITS - PASS1_BITS
#: Pass-2 outputs are descaled by this many bits (the extra 3 is the 1/8 of the 2-D IDCT).
PASS2_DESCALE = CONST_BITS + PASS1_BITS + 3

#: libjpeg indexes its post-IDCT range-limit table with ``x & RANGE_MASK`` (MAXJSAMPLE*4+3).
RANGE_BITS = 10
RANGE_MASK = (1 << RANGE_BITS) - 1
CENTERJSAMPLE = 128
MAXJSAMPLE = 255

# Modular widths that make the hardware exact for *every* input, corrupt ones included.
# The final sample depends only on bits [PASS2_DESCALE, PASS2_DESCALE+RANGE_BITS) of the
# pass-2 sum, and everything before that shift is additions, constant multiplications and
# left shifts, so pass 2 may be computed modulo 2**PASS2_BITS.  Pass 2 then needs its inputs
# (libjpeg's int work array) modulo 2**PASS2_BITS only, which are bits
# [PASS1_DESCALE, PASS1_DESCALE+PASS2_BITS) of the pass-1 sum: pass 1 may be computed
# modulo 2**PASS1_MOD_BITS.  libjpeg's own (int) truncations are coarser than these, so they
# change nothing.
PASS2_BITS = PASS2_DESCALE + RANGE_BITS            # 28
PASS1_MOD_BITS = PASS1_DESCALE + PASS2_BITS        # 39

#: JPEG zigzag order: ZIGZAG[k] is the natural (row-major) index of the k-th coefficient.
ZIGZAG = (
    0, 1, 8, 16, 9, 2, 3, 10,
    17, 24, 32, 25, 18, 11, 4, 5,
    12, 19, 26, 33, 40, 48, 41, 34,
    27, 20, 13, 6, 7, 14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36,
    29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46,
    53, 60, 61, 54, 47, 55, 62, 63,
)


def range_limit(x):
    """libjpeg's masked post-IDCT range limit for one descaled value (Python int).

    The table lookup ``range_limit[x & 1023]`` equals clamping the 10-bit two's-complement
    value of ``x`` (plus the 128 level shift) to 0..255.
    """
    s = x & RANGE_MASK
    if s >= 1 << (RANGE_BITS - 1):
        s -= 1 << RANGE_BITS
    return min(max(s + CENTERJSAMPLE, 0), MAXJSAMPLE)

# --- Reduced-size IDCTs (jidctred.c: jpeg_idct_4x4, jpeg_idct_2x2, jpeg_idct_1x1) ---------
# A scaled decode (scale_denom 2, 4, 8) turns an 8x8 block of coefficients straight into a
# 4x4, 2x2 or 1x1 block of samples.  Same CONST_BITS and PASS1_BITS; these are its FIX()es.
FIX_0_211164243 = 1730
FIX_0_509795579 = 4176
FIX_0_601344887 = 4926
FIX_0_720959822 = 5906
FIX_0_850430095 = 6967
FIX_1_061594337 = 8697
FIX_1_272758580 = 10426
FIX_1_451774981 = 11893
FIX_2_172734803 = 17799
FIX_3_624509785 = 29692

#: Block sizes as log2 (3: 8x8, 2: 4x4, 1: 2x2, 0: 1x1), the form scaling.McuSizesLayout uses.
LOG_SIZES = (3, 2, 1, 0)

#: (pass-1, pass-2) descale of each size's IDCT, by log2 size.  The 4x4 and 2x2 passes shift
#: one and two bits more than the 8x8 ones; the 1x1 IDCT is DESCALE(dc, 3) alone (pass 1 is
#: the identity).
DESCALES = {
    3: (PASS1_DESCALE, PASS2_DESCALE),
    2: (CONST_BITS - PASS1_BITS + 1, CONST_BITS + PASS1_BITS + 3 + 1),     # 12, 19
    1: (CONST_BITS - PASS1_BITS + 2, CONST_BITS + PASS1_BITS + 3 + 2),     # 13, 20
    0: (0, 3),
}

#: (mod_bits, descale) of each size's pass 2 and pass 1, by log2 size: the same argument as
#: PASS2_BITS / PASS1_MOD_BITS above, per size (pass 2 keeps the RANGE_BITS that the range
#: limit reads above its descale; pass 1 keeps what pass 2 needs above its own).  The widest
#: is the 2x2's 30-bit pass 2, still within libjpeg's 32-bit (int) workspace, so its
#: truncation changes nothing here either.
SIZE_PASS2 = {log: (d2 + RANGE_BITS, d2) for log, (_, d2) in DESCALES.items()}
SIZE_PASS1 = {log: (d1 + SIZE_PASS2[log][0], d1) for log, (d1, _) in DESCALES.items()}
#: Width of the work array (pass-1 outputs) when every size has to pass through it.
REDUCED_WORK_BITS = max(mod - d for mod, d in SIZE_PASS1.values())   # 30
