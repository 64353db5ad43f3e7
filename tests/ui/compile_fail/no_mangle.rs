use lookahead_device::kernel;

#[kernel]
#[no_mangle]
pub fn k(n: u32) {
    let _ = n;
}

fn main() {}
