// `min_len(y = N)` with a `u32` constant: the rule's own words at `N`, not a type mismatch
// inside the launcher.
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

const BINS: u32 = 256;

#[kernel(min_len(y = BINS))]
pub fn k(y: &mut [f32]) {
    y[0] = 1.0;
}

fn main() {}
