use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn scale(a: f32, y: &mut [f32]) {
    y[0] *= a;
}

// A `Vec` is host memory: only the emulator takes it.
fn run(gpu: &lookahead::Gpu, y: &mut Vec<f32>) -> lookahead::Result<()> {
    scale::launch(gpu, lookahead::launch::LaunchConfig::for_len(1, 32), 2.0, y)
}

fn main() {}
