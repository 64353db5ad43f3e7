use lookahead_device::kernel;

#[kernel]
pub fn k(a: [f32; 4]) {
    let _ = a;
}

fn main() {}
