//! Warp-wide matrix multiply-accumulate on the tensor cores (`mma.sync`, sm_80 and later):
//! the whole warp multiplies a 16 x 8 by an 8 x 8 matrix of TF32 values into a 16 x 8 FP32
//! accumulator, each lane holding its fixed fragment of each operand.
//!
//! | item | PTX | needs |
//! | --- | --- | --- |
//! | [`to_tf32`] | `cvt.rna.tf32.f32` | sm_80 |
//! | [`m16n8k8_tf32`] | `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` | sm_80 |
//!
//! Lane `l` holds, with `g = l / 4` and `t = l % 4`:
//!
//! | operand | register `r` holds element |
//! | --- | --- |
//! | `a` (16 x 8, row `m`, column `k`) | `(g + 8 (r % 2), t + 4 (r / 2))` |
//! | `b` (8 x 8, row `k`, column `n`) | `(t + 4 r, g)` |
//! | `c`, `d` (16 x 8, row `m`, column `n`) | `(g + 8 (r / 2), 2 t + r % 2)` |
//!
//! TF32 keeps 10 of FP32's 23 mantissa bits: a product of TF32 values is exact in FP32 but
//! each input is rounded by up to 2^-11 of itself ([`to_tf32`]); the sums are FP32's. Use
//! it where that error is bounded and accounted for (a filter whose survivors are computed
//! exactly, as the IVF example's tiled scan does), not where FP32 results are expected.
//!
//! On the CPU emulator both are computed from the same fragments (the product through warp
//! shuffles, in FP32 with one rounding per term), so a kernel's fragment bookkeeping is
//! checked in CI; the hardware's own summation order is not modelled.

/// `x` rounded to TF32 (10 mantissa bits, to nearest, ties away from zero), as the bits of
/// an FP32 value: the operand format of [`m16n8k8_tf32`]. sm_80 and later.
#[inline(always)]
pub fn to_tf32(x: f32) -> u32 {
    needs_arch!(
        "sm_80",
        "to_tf32 (cvt.rna.tf32.f32) needs sm_80 (Ampere) or newer"
    );
    gpu_or_host!(
        {
            let out: u32;
            // SAFETY: a register conversion.
            unsafe {
                core::arch::asm!(
                    "cvt.rna.tf32.f32 {o}, {i};",
                    o = out(reg32) out,
                    i = in(reg32) x.to_bits(),
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            out
        },
        tf32_on_host(x)
    )
}

/// [`to_tf32`] in integer arithmetic: adding half of the dropped bits' place to the
/// magnitude rounds it to nearest, ties away from zero (a carry moves into the exponent as
/// it should); infinities and NaNs keep their kind.
#[cfg(not(target_arch = "nvptx64"))]
fn tf32_on_host(x: f32) -> u32 {
    const DROPPED: u32 = (1 << 13) - 1;
    if !x.is_finite() {
        return x.to_bits() & !DROPPED | (x.is_nan() as u32) << 13;
    }
    (x.to_bits() + (1 << 12)) & !DROPPED
}

/// `d = a b + c` over the warp, each operand the lane's fragment (module docs): `a` 16 x 8
/// and `b` 8 x 8 in TF32 ([`to_tf32`]), `c` and `d` 16 x 8 in FP32. Every lane of the warp
/// must call it (warp-synchronous, `.aligned`). sm_80 and later.
#[inline(always)]
pub fn m16n8k8_tf32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    needs_arch!(
        "sm_80",
        "m16n8k8_tf32 (mma.sync ... .tf32) needs sm_80 (Ampere) or newer"
    );
    gpu_or_host!(
        {
            let (d0, d1, d2, d3): (u32, u32, u32, u32);
            // SAFETY: a register operation of the full warp, which every lane reaches
            // (the caller's contract; the instruction is `.aligned`).
            unsafe {
                core::arch::asm!(
                    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \
                     {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
                     {{{c0}, {c1}, {c2}, {c3}}};",
                    d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                    c0 = in(reg32) c[0].to_bits(), c1 = in(reg32) c[1].to_bits(),
                    c2 = in(reg32) c[2].to_bits(), c3 = in(reg32) c[3].to_bits(),
                    options(nostack, preserves_flags)
                )
            };
            [d0, d1, d2, d3].map(f32::from_bits)
        },
        mma_on_host(a, b, c)
    )
}

/// [`m16n8k8_tf32`] on the emulator: each lane gathers the row of `a` and the column of `b`
/// its outputs need with shuffles, and sums the 8 products in order with `fma`.
#[cfg(not(target_arch = "nvptx64"))]
fn mma_on_host(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    use crate::math::GpuFloat;
    use crate::warp::shfl_idx_u32;
    let lane = crate::index::lane_id();
    let (g, t) = (lane / 4, lane % 4);
    let mut d = c;
    for k in 0..8u32 {
        // Every lane shuffles the same registers: `k` is the same on all of them.
        let (kr, kt) = ((k / 4) as usize, k % 4);
        let a_lo = f32::from_bits(shfl_idx_u32(a[2 * kr], g * 4 + kt));
        let a_hi = f32::from_bits(shfl_idx_u32(a[2 * kr + 1], g * 4 + kt));
        let b_even = f32::from_bits(shfl_idx_u32(b[kr], 2 * t * 4 + kt));
        let b_odd = f32::from_bits(shfl_idx_u32(b[kr], (2 * t + 1) * 4 + kt));
        d[0] = GpuFloat::mul_add(a_lo, b_even, d[0]);
        d[1] = GpuFloat::mul_add(a_lo, b_odd, d[1]);
        d[2] = GpuFloat::mul_add(a_hi, b_even, d[2]);
        d[3] = GpuFloat::mul_add(a_hi, b_odd, d[3]);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::to_tf32;

    #[test]
    fn tf32_rounds_to_nearest_ties_away_from_zero() {
        let tf32 = |bits: u32| to_tf32(f32::from_bits(bits));
        // 13 bits dropped: below half rounds down, half and above up, on either sign.
        assert_eq!(tf32(0x3F80_0FFF), 0x3F80_0000);
        assert_eq!(tf32(0x3F80_1000), 0x3F80_2000);
        assert_eq!(tf32(0xBF80_1000), 0xBF80_2000);
        // A carry out of the mantissa moves into the exponent.
        assert_eq!(tf32(0x3FFF_F000), 0x4000_0000);
        assert_eq!(f32::from_bits(tf32(1.5f32.to_bits())), 1.5);
        assert!(f32::from_bits(tf32(f32::NAN.to_bits())).is_nan());
        assert_eq!(tf32(f32::INFINITY.to_bits()), f32::INFINITY.to_bits());
        let x = 0.1f32;
        let r = f32::from_bits(to_tf32(x));
        assert!(
            (r - x).abs() <= x * (1.0 / 2048.0),
            "within 2^-11: {r} vs {x}"
        );
    }
}
