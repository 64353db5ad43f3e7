//! Arrays of DeviceCopy elements pass by value.
use lookahead_device::kernel;

static PTX: &[(u32, &str)] = &[];

#[kernel(min_len(out = 1))]
pub fn weights(w: [f32; 4], out: &mut [f32]) {
    out[0] = w[0] + w[1] + w[2] + w[3];
}

fn main() {
    let emu = lookahead::emu::Emulator::new();
    let mut out = vec![0.0f32];
    let cfg = lookahead::launch::LaunchConfig::for_len(1, 1);
    weights::launch(&emu, cfg, [1.0, 2.0, 3.0, 4.0], &mut out).unwrap();
    assert_eq!(out, [10.0]);
}
