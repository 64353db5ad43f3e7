//! `copy = auto(..)` may list `load_store`: its entries are candidates like the others.
use lookahead::launch::autotune::{CopyKind, Variant};
use lookahead_device::prelude::*;

static PTX: &[(u32, &str)] = &[];

#[kernel(min_len(out = 32))]
pub fn tile_sums(x: &[f32], out: &mut [f32]) {
    let t = thread_idx_x() as usize;
    let tiles = x.len() / 32;
    let mut acc = 0.0;
    #[prefetch_next(into = shared([f32; 32]), stages = 3, copy = auto(load_store, cp_async), of(tile = &x[i * 32..(i + 1) * 32]))]
    for i in 0..tiles {
        acc += tile[t];
    }
    out[t] = acc;
}

fn main() {
    assert!(tile_sums::CANDIDATES.contains(&Variant::pipelined(CopyKind::LoadStore, 3)));
    let emu = lookahead::emu::Emulator::new();
    let x: Vec<f32> = (0..32 * 4).map(|i| (i % 32) as f32).collect();
    let want: Vec<f32> = (0..32).map(|t| 4.0 * t as f32).collect();
    for v in tile_sums::CANDIDATES {
        let mut out = vec![f32::NAN; 32];
        let cfg = lookahead::launch::LaunchConfig::for_len(32, 32);
        tile_sums::launch_variant(*v, &emu, cfg, &x, &mut out).unwrap();
        assert_eq!(out, want, "{v}");
    }
}
