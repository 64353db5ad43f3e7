use lookahead_device::kernel;

#[kernel]
pub fn k(b: Box<[f32]>) {
    let _ = b;
}

fn main() {}
