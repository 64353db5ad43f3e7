use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn names(x: &[String], out: &mut [u32]) {
    out[0] = x.len() as u32;
}

fn main() {}
