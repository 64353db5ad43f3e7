use lookahead_device::kernel;

#[kernel(launch_bounds(threads = 2048))]
pub fn too_many_threads(x: &[f32]) {
    let _ = x;
}

#[kernel(launch_bounds(blocks_per_sm = 2))]
pub fn no_threads(x: &[f32]) {
    let _ = x;
}

#[kernel(launch_bounds(threads = 128, min_blocks = 2))]
pub fn unknown_key(x: &[f32]) {
    let _ = x;
}

#[kernel(launch_bounds(threads = 0))]
pub fn zero_threads(x: &[f32]) {
    let _ = x;
}

fn main() {}
