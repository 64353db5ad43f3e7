use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(x: &[Vec<f32>]) {
    let _ = x;
}

fn main() {}
