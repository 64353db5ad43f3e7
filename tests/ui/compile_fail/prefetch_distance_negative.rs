//! A negative distance is a distance behind, which a loop cannot prefetch: the error says a
//! distance counts iterations ahead, not that it is too far.
use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = -1)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}
