use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
#[kernel]
pub fn twice(y: &mut [f32]) {
    y[0] = 1.0;
}

fn main() {}
