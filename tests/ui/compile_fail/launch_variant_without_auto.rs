//! Only kernels with a `level = auto` loop have two entries and `launch_variant`.
use lookahead::launch::autotune::Variant;
use lookahead::launch::LaunchConfig;
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel(ptx = PTX)]
pub fn fixed(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

fn main() {
    let emu = lookahead::emu::Emulator::new();
    let x = vec![1.0f32; 4];
    let mut y = vec![0.0f32; 4];
    fixed::launch_variant(Variant::PLAIN, &emu, LaunchConfig::for_len(4, 4), &x, &mut y).unwrap();
}
