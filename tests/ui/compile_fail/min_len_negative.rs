use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel(min_len(x = -1))]
pub fn k(x: &[f32], y: &mut [f32]) {
    y[0] = x[0];
}

fn main() {}
