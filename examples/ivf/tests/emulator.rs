//! The IVF kernels on the CPU emulator (no GPU): the whole search pipeline (coarse, plan,
//! compact, scan with its shared-memory tiles and warp merges, merge) must return the CPU
//! reference's neighbours, with and without the scan's in-kernel prefetch hints.

use lookahead::emu::{Emulator, Instruction};
use lookahead_ivf::cpu;
use lookahead_ivf::data::Clusters;
use lookahead_ivf::emulated;
use lookahead_ivf::index::IvfLayout;

#[test]
fn emulated_ivf_search_matches_the_cpu_reference() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    println!("seed {seed}");
    let spec = Clusters {
        dim: 24,
        clusters: 24,
        spread: 4.0,
        sigma: 1.0,
        seed,
    };
    let data = spec.points(3000, 0, None);
    let centroids = cpu::kmeans(&spec.points(1000, 1, None), 24, 8, seed);
    let layout = IvfLayout::from_assignment(24, centroids.clone(), &cpu::assign(&centroids, &data));
    let mut lists = vec![0.0; data.data.len()];
    layout.scatter(&data, &mut lists);
    let queries = spec.points(40, 2, None);
    let k = ivf_kernels::K;

    let emu = Emulator::new().prefetch_trace(true);
    for hints in [false, true] {
        let got = emulated::search(&emu, &layout, &lists, &queries, 4, hints).unwrap();
        assert!(got.probed_lists > 0 && got.probed_lists <= 24);
        for q in 0..queries.len() {
            let want = cpu::search(&layout, &lists, queries.row(q), 4, k);
            let ids = &got.ids[q * k..(q + 1) * k];
            let dist = &got.dist[q * k..(q + 1) * k];
            for j in 0..k {
                // The kernel sums in four partial sums: distances agree to rounding, and ids
                // agree except between candidates whose distances tie to rounding.
                let (wd, wi) = want[j];
                assert!(
                    (dist[j] - wd).abs() <= 1e-4 * wd.max(1.0),
                    "query {q} rank {j}: {} vs {wd} (hints {hints})",
                    dist[j]
                );
                if ids[j] != wi {
                    let theirs = want.iter().find(|h| h.1 == ids[j]).map(|h| h.0);
                    assert!(
                        theirs.is_some_and(|d| (d - wd).abs() <= 1e-4 * wd.max(1.0)),
                        "query {q} rank {j}: id {} vs {wi} (hints {hints})",
                        ids[j]
                    );
                }
            }
        }
        let trace = emu.take_prefetch_trace();
        if hints {
            assert!(!trace.is_empty(), "the L2 hints are issued");
            let (lo, hi) = (
                lists.as_ptr() as usize,
                lists.as_ptr() as usize + lists.len() * 4,
            );
            assert!(trace
                .iter()
                .all(|r| r.instruction == Instruction::L2 && r.address >= lo && r.address < hi));
        } else {
            assert!(trace.is_empty(), "no hints, no prefetches");
        }
    }
}
