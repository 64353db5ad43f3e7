use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn weights(w: &[f32; 4], out: &mut [f32]) {
    out[0] = w[0];
}

fn main() {}
