use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(of(x))]
    for _ in 0..x.len() {
        y[0] += 1.0;
    }
}

fn main() {}
