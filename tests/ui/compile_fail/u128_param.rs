use lookahead_device::kernel;

#[kernel]
pub fn k(v: u128) {
    let _ = v;
}

fn main() {}
