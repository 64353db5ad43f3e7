use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

pub struct Ops;

impl Ops {
    #[kernel]
    pub fn method(y: &mut [f32]) {
        y[0] = 1.0;
    }
}

fn main() {}
