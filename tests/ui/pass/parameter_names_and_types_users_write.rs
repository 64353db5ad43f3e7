//! Any parameter name a user can write works, whatever the launcher calls its own locals, and
//! type aliases and full paths of primitive types are parameters like the types they name.
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

type Idx = u32;

#[kernel]
pub fn names(cfg: f32, on: u32, args: &[f32], params: &mut [f32], prepared: usize, entry: u64) {
    let _ = (cfg, on, args, params, prepared, entry);
}

#[kernel]
pub fn auto_names(variant: &[f32], plan: &mut [f32], space: u32) {
    #[prefetch_next(level = auto, distance = 2)]
    for i in 0..variant.len().min(plan.len()) {
        plan[i] = variant[i] + space as f32;
    }
}

#[kernel]
pub fn aliases(i: Idx, n: core::primitive::usize, m: ::core::primitive::u32, y: &mut [f32]) {
    let _ = (i, n, m, y);
}

#[kernel]
pub fn r#match(y: &mut [f32]) {
    y[0] = 1.0;
}

fn main() {
    assert_eq!(r#match::NAME, "match");
    let emu = lookahead::emu::Emulator::new();
    let cfg = lookahead::launch::LaunchConfig::for_len(4, 4);
    let (x, mut y) = (vec![1.0f32; 4], vec![0.0f32; 4]);
    names::launch(&emu, cfg, 1.0, 2, &x, &mut y, 3, 4).unwrap();
    auto_names::launch(&emu, cfg, &x, &mut y, 1).unwrap();
    aliases::launch(&emu, cfg, 1, 2, 3, &mut y).unwrap();
}
