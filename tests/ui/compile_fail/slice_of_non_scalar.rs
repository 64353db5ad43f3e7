use lookahead_device::kernel;

#[kernel]
pub fn k(x: &[Vec<f32>]) {
    let _ = x;
}

fn main() {}
