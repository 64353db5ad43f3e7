use lookahead_device::kernel;

#[kernel]
pub async fn k(x: &[f32]) {
    let _ = x;
}

fn main() {}
