//! Statistics of repeated measurements. The median, [`Summary`], [`quantile`] and the
//! CUDA-event timer are [`lookahead::timing`]'s, re-exported so a benchmark finds them here;
//! this module adds how a summary is shown in a table and the transfer rate.

pub use lookahead::timing::{median, quantile, time_on_stream, Summary};

use std::time::Instant;

use cudarc::driver::sys;
use lookahead::error::DriverContext;
use lookahead::Gpu;

/// `median [min, max]` of `s`, each multiplied by `scale` (1e3 turns seconds into
/// milliseconds) and written with `decimals` digits after the point: `0.2913 [0.2896, 0.2937]`.
pub fn median_range(s: &Summary, scale: f64, decimals: usize) -> String {
    format!(
        "{:.d$} [{:.d$}, {:.d$}]",
        s.median * scale,
        s.min * scale,
        s.max * scale,
        d = decimals
    )
}

/// Runs `measure` once as a warm-up, then `repeats` times; the repeats' results (a time, a
/// rate), in order. The first error stops the runs and is returned.
pub fn repeat_after_warmup<E>(
    repeats: usize,
    mut measure: impl FnMut() -> Result<f64, E>,
) -> Result<Vec<f64>, E> {
    measure()?;
    (0..repeats).map(|_| measure()).collect()
}

/// Gigabytes (1e9 bytes) per second for `bytes` moved in `seconds`; 0 when `seconds` is not
/// positive.
pub fn gb_per_s(bytes: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes / seconds / 1e9
    } else {
        0.0
    }
}

/// Host-to-device copy rate from pinned memory, GB/s (median of 5 synchronous copies of 1
/// GiB after a warm-up): the interconnect baseline the GPU-driven pulls and caches are
/// measured against, in the same run.
pub fn pinned_htod_gbps(gpu: &Gpu) -> lookahead::Result<f64> {
    let bytes = 1usize << 30;
    gpu.bind_to_thread()?;
    let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
    let mut dev: sys::CUdeviceptr = 0;
    // SAFETY: plain allocations, freed below.
    unsafe {
        sys::cuMemHostAlloc(&mut host, bytes, 0)
            .result()
            .during("cuMemHostAlloc")?;
        std::ptr::write_bytes(host as *mut u8, 1, bytes);
        sys::cuMemAlloc_v2(&mut dev, bytes)
            .result()
            .during("cuMemAlloc")?;
    }
    let times = repeat_after_warmup(5, || {
        let t = Instant::now();
        // SAFETY: both buffers hold `bytes`.
        unsafe { sys::cuMemcpyHtoD_v2(dev, host, bytes) }
            .result()
            .during("cuMemcpyHtoD")?;
        Ok::<f64, lookahead::Error>(t.elapsed().as_secs_f64())
    });
    // SAFETY: allocated above.
    unsafe {
        sys::cuMemFree_v2(dev);
        sys::cuMemFreeHost(host);
    }
    Ok(bytes as f64 / median(&times?).unwrap_or(f64::NAN) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_median_and_range() {
        let s = Summary::of(&[0.003, 0.001, 0.002]).unwrap();
        assert_eq!(median_range(&s, 1e3, 2), "2.00 [1.00, 3.00]");
        assert_eq!(gb_per_s(2e9, 0.5), 4.0);
        assert_eq!(gb_per_s(1.0, 0.0), 0.0);
    }

    #[test]
    fn the_warm_up_is_left_out() {
        let mut run = 0.0;
        let times = repeat_after_warmup(3, || {
            run += 1.0;
            Ok::<f64, ()>(run)
        });
        assert_eq!(times, Ok(vec![2.0, 3.0, 4.0]));
        let mut calls = 0;
        let failed = repeat_after_warmup(3, || {
            calls += 1;
            if calls == 2 {
                Err("second run failed")
            } else {
                Ok(1.0)
            }
        });
        assert_eq!((failed, calls), (Err("second run failed"), 2));
    }
}
