use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(level = auto, portable)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}
