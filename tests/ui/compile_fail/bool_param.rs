use lookahead_device::kernel;

#[kernel]
pub fn k(flag: bool) {
    let _ = flag;
}

fn main() {}
