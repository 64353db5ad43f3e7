//! The sharded search on one GPU: an index whose lists are in host memory, searched whole
//! (pulled into device memory, and read in place) and as 1 to 4 shards on the same GPU merged
//! on the host; every answer the same bit for bit, and the whole one checked against the CPU
//! reference. Needs a CUDA GPU and fails (never passes) without one.

use lookahead::Gpu;
use lookahead_ivf::cpu;
use lookahead_ivf::gpu::{Reads, ShardIndex};
use lookahead_ivf::shard::{merge_gathered, Partition, Synthetic};
use lookahead_multi::HostArray;

fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

type Answer = (Vec<f32>, Vec<u32>);

fn search(index: &mut ShardIndex<'_>, queries: &[f32], nprobe: usize) -> Answer {
    index.search(queries, nprobe).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn shards_on_one_gpu_merge_into_the_whole_index_answer() {
    let gpu = Gpu::new(0).expect("these tests need a CUDA GPU");
    let seed = fresh_seed();
    println!("seed {seed}");
    let spec = Synthetic {
        dim: 64,
        nlist: 256,
        vectors: 200_000,
        spread: 1.0,
        sigma: 0.5,
        seed,
    };
    let layout = spec.layout();
    let lists = HostArray::<f32>::from_rows(
        std::slice::from_ref(&gpu),
        spec.vectors,
        spec.dim,
        |first, rows| spec.fill(&layout.offsets, first, rows),
    )
    .unwrap();
    let (nq, nprobe) = (300, 12);
    let queries = spec.queries(nq, 1);
    let stream = gpu.context().new_stream().unwrap();
    let whole_view = lists.view(&gpu, 0..lists.len()).unwrap();
    let mut whole =
        ShardIndex::new(&gpu, &stream, layout.clone(), whole_view, Reads::Pull).unwrap();
    let cold = search(&mut whole, &queries.data, nprobe);
    assert!(
        whole.stats().unwrap().copied_lists > 0,
        "the cold search copied lists"
    );
    let warm = search(&mut whole, &queries.data, nprobe);
    assert_eq!(
        whole.stats().unwrap().copied_lists,
        0,
        "the warm search found them cached"
    );
    assert_eq!(cold, warm, "cold and warm pulls");
    drop(whole);
    let in_place_view = lists.view(&gpu, 0..lists.len()).unwrap();
    let mut in_place = ShardIndex::new(
        &gpu,
        &stream,
        layout.clone(),
        in_place_view,
        Reads::ZeroCopy,
    )
    .unwrap();
    assert_eq!(
        search(&mut in_place, &queries.data, nprobe),
        cold,
        "read in place"
    );
    drop(in_place);
    check_against_cpu(&layout, lists.host(), &queries, nprobe, &cold);
    for ranks in 1..=4 {
        let p = Partition::by_bytes(&layout, ranks);
        let (mut d, mut i) = (Vec::new(), Vec::new());
        for r in 0..ranks {
            let view = lists.view(&gpu, p.floats(r)).unwrap();
            let mut shard =
                ShardIndex::new(&gpu, &stream, p.shard_layout(&layout, r), view, Reads::Pull)
                    .unwrap();
            let (sd, si) = search(&mut shard, &queries.data, nprobe);
            d.extend(sd);
            i.extend(si);
        }
        assert_eq!(merge_gathered(&d, &i, ranks, nq), cold, "{ranks} shards");
    }
}

/// The `K` nearest match the CPU's IVF search (distances to rounding; ids except where
/// candidates tie to rounding).
fn check_against_cpu(
    layout: &lookahead_ivf::index::IvfLayout,
    lists: &[f32],
    queries: &lookahead_ivf::data::Vectors,
    nprobe: usize,
    got: &Answer,
) {
    let k = ivf_kernels::K;
    for q in 0..queries.len() {
        let want = cpu::search(layout, lists, queries.row(q), nprobe, k + 8);
        for j in 0..k {
            let (wd, wi) = want[j];
            let (d, id) = (got.0[q * k + j], got.1[q * k + j]);
            assert!(
                (d - wd).abs() <= 1e-4 * wd.max(1.0),
                "query {q} place {j}: {d} vs {wd}"
            );
            if id != wi {
                let theirs = want.iter().find(|h| h.1 == id).map(|h| h.0);
                assert!(
                    theirs.is_some_and(|t| (t - wd).abs() <= 1e-4 * wd.max(1.0)),
                    "query {q} place {j}: id {id} vs {wi}"
                );
            }
        }
    }
}
