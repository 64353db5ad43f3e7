use lookahead_device::kernel;

#[kernel]
pub fn k(x: &'static [f32]) {
    let _ = x;
}

fn main() {}
