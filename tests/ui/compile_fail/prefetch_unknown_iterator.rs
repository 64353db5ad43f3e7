use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next]
    for (i, v) in x.iter().enumerate() {
        y[i] = *v;
    }
}

fn main() {}
