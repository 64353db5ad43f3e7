use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];
const BLOCK: u32 = 4096;

#[kernel(launch_bounds(threads = BLOCK))]
pub fn k(x: &[f32]) {
    let _ = x;
}

fn main() {}
