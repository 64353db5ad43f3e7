//! A tuple where the launch configuration goes: the message says what to write instead.
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel]
pub fn scale(a: f32, y: &mut [f32]) {
    y[0] *= a;
}

fn run(emu: &lookahead::emu::Emulator, y: &mut Vec<f32>) -> lookahead::Result<()> {
    scale::launch(emu, (1u32, 32u32), 2.0, y)
}

fn main() {}
