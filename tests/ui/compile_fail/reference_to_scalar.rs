use lookahead_device::kernel;

#[kernel]
pub fn k(a: &f32) {
    let _ = a;
}

fn main() {}
