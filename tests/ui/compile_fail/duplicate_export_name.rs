use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

mod a {
    use lookahead_device::kernel;
    #[kernel]
    pub fn scale(x: &mut [f32]) {
        x[0] = 1.0;
    }
}

mod b {
    use lookahead_device::kernel;
    #[kernel]
    pub fn scale(x: &mut [f32]) {
        x[0] = 2.0;
    }
}

fn main() {}
