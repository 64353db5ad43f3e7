use lookahead_device::kernel;

#[kernel(same_len(x, n))]
pub fn k(x: &[f32], n: usize) {
    let _ = (x, n);
}

fn main() {}
