use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn k(y: &mut [f32]) {
    let v: Vec<f32> = Vec::new();
    y[0] = v.len() as f32;
}

fn main() {}
