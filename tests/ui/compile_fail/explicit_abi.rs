use lookahead_device::kernel;

#[kernel]
pub extern "C" fn k(n: u32) {
    let _ = n;
}

fn main() {}
