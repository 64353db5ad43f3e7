//! `min_len(y)` without the length: the error points at `y` and shows how to write it.
use lookahead_device::kernel;

#[kernel(min_len(y))]
pub fn k(x: &[f32], y: &mut [f32]) {
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}
