use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn scale(a: f32, y: &mut [f32]) {
    y[0] *= a;
}

// A `CudaSlice` lives on a GPU: the emulator takes host memory.
fn run(
    emu: &lookahead::emu::Emulator,
    y: &mut cudarc::driver::CudaSlice<f32>,
) -> lookahead::Result<()> {
    scale::launch(emu, lookahead::launch::LaunchConfig::for_len(1, 32), 2.0, y)
}

fn main() {}
