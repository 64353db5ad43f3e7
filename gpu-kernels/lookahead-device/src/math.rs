//! Floating-point math for kernels: [`GpuFloat`], in the prelude, gives `f32` and `f64` the
//! methods the standard library gives them on the host (`x.sin()`, `x.exp()`, `x.powf(y)`,
//! `x.sqrt()`, ...), so a kernel body compiles for the GPU and for the host alike.
//!
//! On the GPU each method is libdevice's function (`__nv_sinf`, `__nv_exp`, ...: the builder
//! links libdevice when a kernel calls one, and inlines it), except the ones PTX has an
//! instruction for, which are that instruction, correctly rounded: `sqrt` is `sqrt.rn`,
//! `mul_add` is `fma.rn`, `floor`/`ceil`/`trunc` are `cvt.rmi`/`cvt.rpi`/`cvt.rzi`, `abs` is
//! `abs`. On the host (and so in the emulator) each is the standard library's method.
//!
//! The results of the libdevice functions can differ from the host's in the last bits (the
//! CUDA C Programming Guide lists each function's maximum error in ulp: `sinf` 2, `expf`
//! 2, `powf` 4, `logf` 1, ...); the instructions above are exact on both sides. Compare GPU
//! and emulator results with a tolerance of a few ulp.
//!
//! Inherent methods come first: on the host the standard library's `f32::sin` is what
//! `x.sin()` calls either way; in `no_std` code and on the GPU it is this trait's.

#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

/// The floating-point functions of the standard library, on the GPU and the host: see the
/// [module documentation](self). In the prelude.
pub trait GpuFloat: Copy {
    /// Sine (radians).
    fn sin(self) -> Self;
    /// Cosine (radians).
    fn cos(self) -> Self;
    /// Tangent (radians).
    fn tan(self) -> Self;
    /// Arcsine, in radians.
    fn asin(self) -> Self;
    /// Arccosine, in radians.
    fn acos(self) -> Self;
    /// Arctangent, in radians.
    fn atan(self) -> Self;
    /// Four-quadrant arctangent of `self` (y) and `other` (x), in radians.
    fn atan2(self, other: Self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// `2^self`.
    fn exp2(self) -> Self;
    /// `e^self - 1`, accurate near zero.
    fn exp_m1(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// `ln(1 + self)`, accurate near zero.
    fn ln_1p(self) -> Self;
    /// `self` raised to `n`.
    fn powf(self, n: Self) -> Self;
    /// `self` raised to the integer `n`.
    fn powi(self, n: i32) -> Self;
    /// Cube root.
    fn cbrt(self) -> Self;
    /// `sqrt(self^2 + other^2)` without overflow in the squares.
    fn hypot(self, other: Self) -> Self;
    /// Rounds half-way cases away from zero.
    fn round(self) -> Self;
    /// Square root, correctly rounded (`sqrt.rn`).
    fn sqrt(self) -> Self;
    /// `self * a + b` with one rounding (`fma.rn`).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Largest integer not above `self` (`cvt.rmi`).
    fn floor(self) -> Self;
    /// Smallest integer not below `self` (`cvt.rpi`).
    fn ceil(self) -> Self;
    /// Integer part, rounding toward zero (`cvt.rzi`).
    fn trunc(self) -> Self;
    /// Absolute value (`abs`).
    fn abs(self) -> Self;
    /// Inverse hyperbolic sine.
    fn asinh(self) -> Self;
    /// Inverse hyperbolic cosine.
    fn acosh(self) -> Self;
    /// Inverse hyperbolic tangent.
    fn atanh(self) -> Self;
    /// `self` with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// `self - self.trunc()`.
    fn fract(self) -> Self;
    /// 1 for positive numbers and +0, -1 for negative ones and -0, NaN for NaN.
    fn signum(self) -> Self;
    /// The logarithm of `self` in base `base`.
    fn log(self, base: Self) -> Self;
    /// `(sin, cos)` of `self`.
    fn sin_cos(self) -> (Self, Self) {
        (self.sin(), self.cos())
    }
    /// The quotient of Euclidean division: `(self / rhs).trunc()`, one less when the
    /// remainder would be negative (one more for a negative `rhs`).
    fn div_euclid(self, rhs: Self) -> Self;
    /// The remainder of Euclidean division, in `0..rhs.abs()`.
    fn rem_euclid(self, rhs: Self) -> Self;
}

/// One libdevice function per method, for one float type.
macro_rules! libdevice {
    ($t:ty: $($f:ident($($a:ident: $at:ty),*)),* $(,)?) => {
        #[cfg(target_arch = "nvptx64")]
        extern "C" {
            $(fn $f($($a: $at),*) -> $t;)*
        }
    };
}

libdevice!(f32: __nv_asinhf(x: f32), __nv_acoshf(x: f32), __nv_atanhf(x: f32),
    __nv_copysignf(x: f32, y: f32), __nv_sinf(x: f32), __nv_cosf(x: f32), __nv_tanf(x: f32),
    __nv_asinf(x: f32), __nv_acosf(x: f32), __nv_atanf(x: f32), __nv_atan2f(y: f32, x: f32),
    __nv_sinhf(x: f32),
    __nv_coshf(x: f32), __nv_tanhf(x: f32), __nv_expf(x: f32), __nv_exp2f(x: f32),
    __nv_expm1f(x: f32), __nv_logf(x: f32), __nv_log2f(x: f32), __nv_log10f(x: f32),
    __nv_log1pf(x: f32), __nv_powf(x: f32, y: f32), __nv_powif(x: f32, n: i32),
    __nv_cbrtf(x: f32), __nv_hypotf(x: f32, y: f32), __nv_roundf(x: f32));
libdevice!(f64: __nv_asinh(x: f64), __nv_acosh(x: f64), __nv_atanh(x: f64),
    __nv_copysign(x: f64, y: f64), __nv_sin(x: f64), __nv_cos(x: f64), __nv_tan(x: f64),
    __nv_asin(x: f64), __nv_acos(x: f64), __nv_atan(x: f64), __nv_atan2(y: f64, x: f64),
    __nv_sinh(x: f64),
    __nv_cosh(x: f64), __nv_tanh(x: f64), __nv_exp(x: f64), __nv_exp2(x: f64),
    __nv_expm1(x: f64), __nv_log(x: f64), __nv_log2(x: f64), __nv_log10(x: f64),
    __nv_log1p(x: f64), __nv_pow(x: f64, y: f64), __nv_powi(x: f64, n: i32),
    __nv_cbrt(x: f64), __nv_hypot(x: f64, y: f64), __nv_round(x: f64));

// `fma.rn` as LLVM's own intrinsic rather than inline assembly: LLVM then knows it is an
// arithmetic operation and keeps a GEMM's unrolled FMAs in the order they were written (with
// `asm!` it regrouped them by accumulator, so every operand of a tile was live at once and
// `ptxas` spilled).
#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    #[link_name = "llvm.fma.f32"]
    safe fn llvm_fma_f32(x: f32, a: f32, b: f32) -> f32;
    #[link_name = "llvm.fma.f64"]
    safe fn llvm_fma_f64(x: f64, a: f64, b: f64) -> f64;
}

/// A method that is a libdevice call on the GPU and the standard library's on the host.
macro_rules! via_libdevice {
    ($t:ty, $m:ident, $nv:ident $(, $a:ident: $at:ty)*) => {
        #[inline(always)]
        fn $m(self $(, $a: $at)*) -> $t {
            // SAFETY: libdevice's functions are pure and total.
            gpu_or_host!(unsafe { $nv(self $(, $a)*) }, <$t>::$m(self $(, $a)*))
        }
    };
}

/// A method that is one PTX instruction on the GPU and the standard library's on the host.
macro_rules! via_instruction {
    ($t:ty, $m:ident, $asm:expr, $reg:ident $(, $a:ident)*) => {
        #[inline(always)]
        fn $m(self $(, $a: $t)*) -> $t {
            gpu_or_host!(
                {
                    let out: $t;
                    // SAFETY: an arithmetic instruction on registers.
                    unsafe {
                        core::arch::asm!($asm, o = out($reg) out, x = in($reg) self
                            $(, $a = in($reg) $a)*, options(pure, nomem, nostack))
                    };
                    out
                },
                <$t>::$m(self $(, $a)*)
            )
        }
    };
}

macro_rules! gpu_float {
    ($t:ty, $reg:ident, $sfx:literal, $fma:ident, [$($m:ident $nv:ident),*], $atan2:ident,
     $powf:ident, $powi:ident, $hypot:ident, $copysign:ident) => {
        #[deny(unconditional_recursion)]
        impl GpuFloat for $t {
            $(via_libdevice!($t, $m, $nv);)*
            via_libdevice!($t, atan2, $atan2, other: $t);
            via_libdevice!($t, powf, $powf, n: $t);
            via_libdevice!($t, powi, $powi, n: i32);
            via_libdevice!($t, hypot, $hypot, other: $t);
            via_instruction!($t, sqrt, concat!("sqrt.rn.", $sfx, " {o}, {x};"), $reg);
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t {
                gpu_or_host!($fma(self, a, b), <$t>::mul_add(self, a, b))
            }
            via_instruction!($t, floor, concat!("cvt.rmi.", $sfx, ".", $sfx, " {o}, {x};"), $reg);
            via_instruction!($t, ceil, concat!("cvt.rpi.", $sfx, ".", $sfx, " {o}, {x};"), $reg);
            via_instruction!($t, trunc, concat!("cvt.rzi.", $sfx, ".", $sfx, " {o}, {x};"), $reg);
            via_instruction!($t, abs, concat!("abs.", $sfx, " {o}, {x};"), $reg);
            via_libdevice!($t, copysign, $copysign, sign: $t);
            #[inline(always)]
            fn signum(self) -> $t {
                if self.is_nan() { <$t>::NAN } else { GpuFloat::copysign(1.0, self) }
            }
            #[inline(always)]
            fn log(self, base: $t) -> $t {
                GpuFloat::ln(self) / GpuFloat::ln(base)
            }
            #[inline(always)]
            fn div_euclid(self, rhs: $t) -> $t {
                let q = GpuFloat::trunc(self / rhs);
                if self % rhs < 0.0 {
                    return if rhs > 0.0 { q - 1.0 } else { q + 1.0 };
                }
                q
            }
            #[inline(always)]
            fn rem_euclid(self, rhs: $t) -> $t {
                let r = self % rhs;
                if r < 0.0 { r + GpuFloat::abs(rhs) } else { r }
            }
            #[inline(always)]
            fn fract(self) -> $t {
                self - GpuFloat::trunc(self)
            }
        }
    };
}

gpu_float!(f32, reg32, "f32", llvm_fma_f32, [sin __nv_sinf, cos __nv_cosf, tan __nv_tanf, asin __nv_asinf,
    acos __nv_acosf, atan __nv_atanf, sinh __nv_sinhf, cosh __nv_coshf, tanh __nv_tanhf,
    exp __nv_expf, exp2 __nv_exp2f, exp_m1 __nv_expm1f, ln __nv_logf, log2 __nv_log2f,
    log10 __nv_log10f, ln_1p __nv_log1pf, cbrt __nv_cbrtf, round __nv_roundf,
    asinh __nv_asinhf, acosh __nv_acoshf, atanh __nv_atanhf],
    __nv_atan2f, __nv_powf, __nv_powif, __nv_hypotf, __nv_copysignf);
gpu_float!(f64, reg64, "f64", llvm_fma_f64, [sin __nv_sin, cos __nv_cos, tan __nv_tan, asin __nv_asin,
    acos __nv_acos, atan __nv_atan, sinh __nv_sinh, cosh __nv_cosh, tanh __nv_tanh,
    exp __nv_exp, exp2 __nv_exp2, exp_m1 __nv_expm1, ln __nv_log, log2 __nv_log2,
    log10 __nv_log10, ln_1p __nv_log1p, cbrt __nv_cbrt, round __nv_round,
    asinh __nv_asinh, acosh __nv_acosh, atanh __nv_atanh],
    __nv_atan2, __nv_pow, __nv_powi, __nv_hypot, __nv_copysign);

#[cfg(test)]
mod tests {
    use super::GpuFloat;

    #[test]
    fn methods_are_the_standard_librarys_on_the_host() {
        let x = 0.7f32;
        assert_eq!(GpuFloat::sin(x), x.sin());
        assert_eq!(GpuFloat::powf(x, 2.5), x.powf(2.5));
        assert_eq!(GpuFloat::mul_add(x, 3.0, 1.0), x.mul_add(3.0, 1.0));
        assert_eq!(GpuFloat::atan2(1.0f64, -2.0), 1.0f64.atan2(-2.0));
        assert_eq!(GpuFloat::powi(1.5f64, 3), 1.5f64.powi(3));
        assert_eq!(GpuFloat::floor(-1.5f32), -2.0);
        assert_eq!(GpuFloat::signum(-0.0f32), -1.0);
        assert_eq!(
            GpuFloat::rem_euclid(-7.0f64, 4.0),
            (-7.0f64).rem_euclid(4.0)
        );
        assert_eq!(
            GpuFloat::div_euclid(-7.0f64, 4.0),
            (-7.0f64).div_euclid(4.0)
        );
        assert_eq!(GpuFloat::div_euclid(7.0f32, -4.0), 7.0f32.div_euclid(-4.0));
        assert_eq!(GpuFloat::fract(2.75f32), 0.75);
        assert_eq!(GpuFloat::asinh(0.5f64), 0.5f64.asinh());
    }
}
