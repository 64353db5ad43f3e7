use lookahead_device::kernel;

#[kernel(min_len(out = 1))]
pub fn k(x: &[f32]) {
    let _ = x;
}

fn main() {}
