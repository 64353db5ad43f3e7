use lookahead_device::kernel;

#[kernel]
pub fn k(x: impl Copy) {
    let _ = x;
}

fn main() {}
