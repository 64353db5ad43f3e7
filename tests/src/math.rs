//! The reference of `ptx_kernels::intr_math` and its check, shared by the emulator's test
//! and the GPU's.
//!
//! The kernel calls the math methods of `GpuFloat`: libdevice on a GPU, the host's C
//! library on the emulator. The reference is the `libm` crate (a port of musl's), which
//! shares no code with either, so both are checked against something independent, within a
//! few units in the last place for the rounded functions and exactly for the exact ones.

/// The kernel's f32 results for `v`, in order, by `libm`.
fn f32_results(v: f32) -> [f32; 8] {
    [
        libm::sinf(v),
        libm::expf(v),
        libm::log1pf(libm::fabsf(v)),
        libm::powf(v, libm::atan2f(1.5, v)),
        libm::sqrtf(libm::fabsf(v)),
        libm::fmaf(v, 2.0, 1.0),
        libm::floorf(v) + libm::ceilf(v) + libm::truncf(v) + libm::roundf(v),
        libm::tanhf(v) + libm::cbrtf(v) + v * v * v,
    ]
}

/// The kernel's f64 results for `v`, in order, by `libm`.
fn f64_results(v: f32) -> [f64; 4] {
    let d = v as f64;
    [
        libm::cos(d),
        libm::sqrt(libm::fabs(d)),
        libm::log10(libm::exp2(d)),
        libm::hypot(d, 2.0),
    ]
}

/// How many units in the last place each f32 result may differ by: libdevice's and the C
/// libraries' documented bounds are 1 to 4 ulp per function, a composed result (a power of
/// an arctangent, a sum of three) may add a few; square roots, fused multiply-adds and the
/// rounding conversions are exact (half an ulp: equal).
pub const F32_ULPS: [f64; 8] = [2.0, 2.0, 2.0, 16.0, 0.5, 0.5, 0.5, 8.0];

/// The same for the f64 results.
pub const F64_ULPS: [f64; 4] = [2.0, 0.5, 4.0, 2.0];

/// `got` and `want` agree to `ulps` units of `ulp` relative to `want`, or to 1 for
/// `|want| < 1` (a composed function near zero, `log10(exp2(v))`, turns the inner one's
/// relative error into an absolute one), or are both NaN.
fn close(got: f64, want: f64, ulp: f64, ulps: f64) -> bool {
    (got.is_nan() && want.is_nan()) || (got - want).abs() <= ulps * ulp * want.abs().max(1.0)
}

/// Where the kernel's results for inputs `x` (`out32`: 8 per input, `out64`: 4 per input)
/// differ from the reference by more than [`F32_ULPS`] / [`F64_ULPS`]: one line each (at
/// most 10, then a count); empty when all agree.
pub fn math_mismatches(x: &[f32], out32: &[f32], out64: &[f64]) -> Vec<String> {
    let mut bad = Vec::new();
    if out32.len() != 8 * x.len() || out64.len() != 4 * x.len() {
        return vec![format!(
            "{} f32 and {} f64 results for {} inputs",
            out32.len(),
            out64.len(),
            x.len()
        )];
    }
    for (i, &v) in x.iter().enumerate() {
        for (k, want) in f32_results(v).into_iter().enumerate() {
            let got = out32[8 * i + k];
            if !close(got as f64, want as f64, f32::EPSILON as f64, F32_ULPS[k]) {
                bad.push(format!("f32 result {k} of x = {v}: {got} vs {want}"));
            }
        }
        for (k, want) in f64_results(v).into_iter().enumerate() {
            let got = out64[4 * i + k];
            if !close(got, want, f64::EPSILON, F64_ULPS[k]) {
                bad.push(format!("f64 result {k} of x = {v}: {got} vs {want}"));
            }
        }
    }
    let total = bad.len();
    bad.truncate(10);
    if total > bad.len() {
        bad.push(format!("{} more differ", total - bad.len()));
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's own results pass; one result a few ulp beyond its bound, a result of
    /// the wrong function and an unwritten (NaN) one do not.
    #[test]
    fn the_check_catches_an_inexact_wrong_or_missing_result() {
        let x: Vec<f32> = (0..200).map(|i| i as f32 / 25.0 - 4.0).collect();
        let out32: Vec<f32> = x.iter().flat_map(|&v| f32_results(v)).collect();
        let out64: Vec<f64> = x.iter().flat_map(|&v| f64_results(v)).collect();
        assert_eq!(math_mismatches(&x, &out32, &out64), Vec::<String>::new());

        let mut off = out32.clone();
        off[8 * 150 + 1] = f32::from_bits(off[8 * 150 + 1].to_bits() + 8); // exp(2), 8 ulp off
        let m = math_mismatches(&x, &off, &out64);
        assert!(
            m.len() == 1 && m[0].starts_with("f32 result 1 of x = 2:"),
            "{m:?}"
        );

        let mut exact = out32.clone();
        exact[8 * 31 + 4] = f32::from_bits(exact[8 * 31 + 4].to_bits() + 1); // sqrt, 1 ulp
        assert_eq!(math_mismatches(&x, &exact, &out64).len(), 1);

        let mut wrong = out64.clone();
        wrong[4 * 40] = (x[40] as f64).sin(); // sin where cos belongs
        assert_eq!(math_mismatches(&x, &out32, &wrong).len(), 1);

        let mut unwritten = out32.clone();
        unwritten[8 * 50 + 1] = f32::NAN;
        assert_eq!(math_mismatches(&x, &unwritten, &out64).len(), 1);
    }
}
