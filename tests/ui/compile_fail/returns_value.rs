use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}
