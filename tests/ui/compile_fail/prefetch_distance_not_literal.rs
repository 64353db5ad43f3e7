use lookahead_device::kernel;

const D: usize = 4;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = D)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {}
