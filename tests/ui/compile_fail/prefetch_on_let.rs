use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    #[prefetch_next]
    let v = x[0];
    y[0] = v;
}

fn main() {}
