use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn inner(y: &mut [f32]) {
    y[0] = 1.0;
}

#[kernel]
pub fn outer(y: &mut [f32]) {
    inner(y);
}

fn main() {}
