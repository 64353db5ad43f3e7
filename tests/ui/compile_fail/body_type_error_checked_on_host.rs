use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn scale(a: f32, y: &mut [f32]) {
    y[0] *= a as u32;
}

fn main() {}
