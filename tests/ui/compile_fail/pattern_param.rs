use lookahead_device::kernel;

#[kernel]
pub fn k((a, b): (f32, f32)) {
    let _ = a + b;
}

fn main() {}
