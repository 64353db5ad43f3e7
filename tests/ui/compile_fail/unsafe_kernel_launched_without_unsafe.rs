use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

/// # Safety
/// `i` is in bounds of `y`.
#[kernel]
pub unsafe fn k(i: usize, y: &mut [f32]) {
    *y.get_unchecked_mut(i) = 1.0;
}

fn run(emu: &lookahead::emu::Emulator, y: &mut Vec<f32>) -> lookahead::Result<()> {
    k::launch(emu, lookahead::launch::LaunchConfig::for_len(1, 32), 0, y)
}

fn main() {}
