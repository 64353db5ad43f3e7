use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

fn main() {
    #[kernel]
    pub fn nested(y: &mut [f32]) {
        y[0] = 1.0;
    }
}
