use lookahead_device::kernel;

#[kernel(fast_math)]
pub fn k(x: &[f32]) {
    let _ = x;
}

fn main() {}
