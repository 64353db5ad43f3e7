use lookahead_device::kernel;

#[kernel]
pub fn k(v: Vec<f32>) {
    let _ = v;
}

fn main() {}
