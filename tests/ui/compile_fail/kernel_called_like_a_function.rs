use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn scale(a: f32, y: &mut [f32]) {
    y[0] *= a;
}

fn main() {
    let mut y = vec![1.0f32; 4];
    scale(2.0, &mut y);
}
