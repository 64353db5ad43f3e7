//! [`FloatExt`]: Rust-CUDA's extension trait for `f32` and `f64`, the libdevice functions
//! the standard library has no method for (`cospi`, `erf`, Bessel functions, ...).

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Math functions of libdevice beyond the standard library's, for `f32` and `f64`, with
/// Rust-CUDA's names. Each is libdevice's function on the GPU; on the host they panic, as
/// Rust-CUDA's do (libdevice exists only on the GPU).
pub trait FloatExt: Sized + private::Sealed {
    /// `cos(self * pi)`.
    fn cospi(self) -> Self;
    /// The error function `erf(self)`.
    fn error_function(self) -> Self;
    /// The complementary error function `1 - erf(self)`.
    fn complementary_error_function(self) -> Self;
    /// The `x` with `erfc(x) == self`, for `self` in [0, 2].
    fn inv_complementary_error_function(self) -> Self;
    /// The scaled complementary error function `e^(self^2) * erfc(self)`.
    fn scaled_complementary_error_function(self) -> Self;
    /// `(fraction, exponent)` with `self == fraction * 2^exponent`, the fraction 0 or in
    /// [0.5, 1).
    fn frexp(self) -> (Self, i32);
    /// The unbiased exponent (`ilogb`).
    fn unbiased_exp(self) -> i32;
    /// Bessel function of the first kind of order 0.
    fn j0(self) -> Self;
    /// Bessel function of the first kind of order 1.
    fn j1(self) -> Self;
    /// Bessel function of the first kind of order `order`.
    fn jn(self, order: i32) -> Self;
    /// `self * 2^exp`.
    fn ldexp(self, exp: i32) -> Self;
    /// The natural logarithm of the absolute value of the gamma function.
    fn log_gamma(self) -> Self;
    /// `ln(1 + self)`.
    fn log1p(self) -> Self;
    /// The standard normal distribution's cumulative distribution function.
    fn norm_cdf(self) -> Self;
    /// Its inverse, for `self` in (0, 1).
    fn inv_norm_cdf(self) -> Self;
    /// The reciprocal cube root.
    fn rcbrt(self) -> Self;
    /// `self` clamped to [+0.0, 1.0].
    fn saturate(self) -> Self;
    /// `self * 2^exp` (`scalbn`).
    fn scale_by_n(self, exp: i32) -> Self;
    /// `(sin(self * pi), cos(self * pi))`.
    fn sincospi(self) -> (Self, Self);
    /// `sin(self * pi)`.
    fn sinpi(self) -> Self;
    /// The gamma function.
    fn gamma(self) -> Self;
    /// Bessel function of the second kind of order 0.
    fn y0(self) -> Self;
    /// Bessel function of the second kind of order 1.
    fn y1(self) -> Self;
    /// Bessel function of the second kind of order `order`.
    fn yn(self, order: i32) -> Self;
}

/// `$gpu` on the GPU; on the host a panic naming the method.
macro_rules! gpu_only {
    ($name:expr, $gpu:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: libdevice's functions are total; pointer arguments point at locals.
            unsafe { $gpu }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            unimplemented!(concat!(
                "`FloatExt::",
                $name,
                "` can only be used on the GPU"
            ))
        }
    }};
}

macro_rules! float_ext {
    ($t:ident, $lib:ident, [$($m:ident $f:ident),*], [$($other:ident),*], $frexp:ident,
     $ilogb:ident, $jn:ident, $ldexp:ident, $scalbn:ident, $sincospi:ident, $yn:ident,
     $saturate:expr) => {
        /// The libdevice functions behind the methods.
        #[cfg(target_arch = "nvptx64")]
        mod $lib {
            extern "C" {
                $(pub fn $f(x: $t) -> $t;)*
                $(pub fn $other(x: $t) -> $t;)*
                pub fn $frexp(x: $t, exp: *mut i32) -> $t;
                pub fn $ilogb(x: $t) -> i32;
                pub fn $jn(n: i32, x: $t) -> $t;
                pub fn $ldexp(x: $t, exp: i32) -> $t;
                pub fn $scalbn(x: $t, n: i32) -> $t;
                pub fn $sincospi(x: $t, sin: *mut $t, cos: *mut $t);
                pub fn $yn(n: i32, x: $t) -> $t;
            }
        }

        #[cfg_attr(not(target_arch = "nvptx64"), allow(unused_variables))]
        impl FloatExt for $t {
            $(
                #[inline(always)]
                fn $m(self) -> $t {
                    gpu_only!(stringify!($m), $lib::$f(self))
                }
            )*
            #[inline(always)]
            fn frexp(self) -> ($t, i32) {
                gpu_only!("frexp", {
                    let mut exp = 0;
                    ($lib::$frexp(self, &mut exp), exp)
                })
            }
            #[inline(always)]
            fn unbiased_exp(self) -> i32 {
                gpu_only!("unbiased_exp", $lib::$ilogb(self))
            }
            #[inline(always)]
            fn jn(self, order: i32) -> $t {
                gpu_only!("jn", $lib::$jn(order, self))
            }
            #[inline(always)]
            fn ldexp(self, exp: i32) -> $t {
                gpu_only!("ldexp", $lib::$ldexp(self, exp))
            }
            #[inline(always)]
            fn scale_by_n(self, exp: i32) -> $t {
                gpu_only!("scale_by_n", $lib::$scalbn(self, exp))
            }
            #[inline(always)]
            fn sincospi(self) -> ($t, $t) {
                gpu_only!("sincospi", {
                    let (mut sin, mut cos) = (0.0, 0.0);
                    $lib::$sincospi(self, &mut sin, &mut cos);
                    (sin, cos)
                })
            }
            #[inline(always)]
            fn yn(self, order: i32) -> $t {
                gpu_only!("yn", $lib::$yn(order, self))
            }
            #[inline(always)]
            fn saturate(self) -> $t {
                ($saturate)(self)
            }
        }
    };
}

float_ext!(f32, libdevice_f32, [cospi __nv_cospif, error_function __nv_erff,
    complementary_error_function __nv_erfcf, inv_complementary_error_function __nv_erfcinvf,
    scaled_complementary_error_function __nv_erfcxf, j0 __nv_j0f, j1 __nv_j1f,
    log_gamma __nv_lgammaf, log1p __nv_log1pf, norm_cdf __nv_normcdff,
    inv_norm_cdf __nv_normcdfinvf, rcbrt __nv_rcbrtf, sinpi __nv_sinpif, gamma __nv_tgammaf,
    y0 __nv_y0f, y1 __nv_y1f], [__nv_saturatef],
    __nv_frexpf, __nv_ilogbf, __nv_jnf, __nv_ldexpf, __nv_scalbnf, __nv_sincospif, __nv_ynf,
    |x: f32| gpu_only!("saturate", libdevice_f32::__nv_saturatef(x)));
float_ext!(f64, libdevice_f64, [cospi __nv_cospi, error_function __nv_erf,
    complementary_error_function __nv_erfc, inv_complementary_error_function __nv_erfcinv,
    scaled_complementary_error_function __nv_erfcx, j0 __nv_j0, j1 __nv_j1,
    log_gamma __nv_lgamma, log1p __nv_log1p, norm_cdf __nv_normcdf,
    inv_norm_cdf __nv_normcdfinv, rcbrt __nv_rcbrt, sinpi __nv_sinpi, gamma __nv_tgamma,
    y0 __nv_y0, y1 __nv_y1], [],
    __nv_frexp, __nv_ilogb, __nv_jn, __nv_ldexp, __nv_scalbn, __nv_sincospi, __nv_yn,
    // libdevice has no `saturate` for f64: a clamp, as in Rust-CUDA (on the host too).
    |x: f64| x.clamp(0.0, 1.0));
