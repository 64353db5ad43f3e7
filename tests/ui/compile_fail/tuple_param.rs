use lookahead_device::kernel;

#[kernel]
pub fn k(t: (f32, u32)) {
    let _ = t;
}

fn main() {}
