//! Timing GPU work: CUDA-event timers and summaries of repeated measurements (medians), the
//! one implementation the autotuner and the benchmark programs share.

use std::sync::Arc;

use cudarc::driver::{sys, CudaStream};

use crate::error::{DriverContext, Result};

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
/// NaNs sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    Summary::of(values).map(|s| s.median)
}

/// The `q` quantile of `values` (`q` from 0 to 1), interpolated linearly between the two
/// nearest ranks (as R's type 7 and NumPy's default): `quantile(v, 0.5)` is the median,
/// `quantile(v, 0.99)` the 99th percentile. `None` when empty or when `q` is outside 0..=1.
/// NaNs sort last.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let x = q * (s.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    Some(s[lo] + (s[hi] - s[lo]) * (x - lo as f64))
}

/// Smallest, median and largest of a set of measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The smallest value.
    pub min: f64,
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The largest value.
    pub max: f64,
    /// How many values.
    pub count: usize,
}

impl Summary {
    /// The summary of `values`; `None` when empty.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut s = values.to_vec();
        s.sort_by(f64::total_cmp);
        let m = s.len() / 2;
        let median = if s.len() % 2 == 1 {
            s[m]
        } else {
            (s[m - 1] + s[m]) / 2.0
        };
        Some(Summary {
            min: s[0],
            median,
            max: s[s.len() - 1],
            count: s.len(),
        })
    }

    /// `(max - min) / median`: how far apart the repetitions were.
    pub fn spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median
        }
    }
}

/// Milliseconds the work `f` queues on `stream` takes on the GPU: an event recorded before
/// and one after, then a wait for the second. `f`'s own result is returned beside the time.
pub fn time_on_stream<R>(
    stream: &Arc<CudaStream>,
    f: impl FnOnce() -> Result<R>,
) -> Result<(R, f64)> {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.context().new_event(flags).during("cuEventCreate")?;
    let end = stream.context().new_event(flags).during("cuEventCreate")?;
    start.record(stream).during("cuEventRecord")?;
    let r = f()?;
    end.record(stream).during("cuEventRecord")?;
    end.synchronize().during("cuEventSynchronize")?;
    let ms = start.elapsed_ms(&end).during("cuEventElapsedTime")?;
    Ok((r, ms as f64))
}

/// Runs `f` `warmup` times untimed, then `repeats` times timed with [`time_on_stream`];
/// returns the timings in milliseconds.
pub fn repeat_on_stream(
    stream: &Arc<CudaStream>,
    warmup: usize,
    repeats: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        f()?;
    }
    stream.synchronize().during("cuStreamSynchronize")?;
    (0..repeats)
        .map(|_| time_on_stream(stream, &mut f).map(|(_, ms)| ms))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        let s = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.count), (1.0, 3.0, 5.0, 3));
        assert!((s.spread() - 4.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 0.25), Some(2.0));
        assert_eq!(quantile(&v, 0.5), median(&v));
        assert_eq!(quantile(&v, 1.0), Some(5.0));
        assert_eq!(quantile(&[1.0, 2.0], 0.75), Some(1.75));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&v, 1.5), None);
    }
}
