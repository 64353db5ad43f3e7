use lookahead_device::kernel;

#[kernel]
pub fn k(p: *const f32) {
    let _ = p;
}

fn main() {}
