//! The sharded index without a GPU: the partition by bytes, the routing of (query, probe)
//! pairs to the ranks that hold their lists, the merge of the ranks' top-k, and, on the
//! emulator, every rank's search of its shard merged into exactly the whole index's answer,
//! for 1 to 8 ranks.

use ivf_kernels::K;
use lookahead::emu::Emulator;
use lookahead_ivf::cpu;
use lookahead_ivf::emulated::{self, EmulatedParams};
use lookahead_ivf::shard::{merge_gathered, Partition, Synthetic};
use lookahead_uvm::RingQueue;
use rand::{Rng, SeedableRng};

fn seed() -> u64 {
    let s = std::env::var("LOOKAHEAD_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        });
    println!("seed {s} (LOOKAHEAD_TEST_SEED={s} replays it)");
    s
}

/// Offsets of `nlist` lists of random sizes (some empty, some large).
fn random_offsets(rng: &mut impl Rng, nlist: usize) -> Vec<u64> {
    let mut o = vec![0u64];
    for _ in 0..nlist {
        let size = match rng.gen_range(0..10) {
            0 => 0,
            1 => rng.gen_range(500..2000),
            _ => rng.gen_range(1..200),
        };
        o.push(o.last().unwrap() + size);
    }
    o
}

#[test]
fn partitions_cover_every_list_once_balanced_within_one_list() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for ranks in 1..=8 {
        for nlist in [1, 3, 7, 64, 500] {
            let offsets = random_offsets(&mut rng, nlist);
            let p = Partition::of_offsets(&offsets, 512, ranks);
            assert_eq!(p.ranks(), ranks);
            // Contiguous, in order, covering all lists and all vectors.
            let mut next = 0;
            for r in 0..ranks {
                let l = p.lists(r);
                assert_eq!(l.start, next, "rank {r} of {ranks}, {nlist} lists");
                next = l.end;
                for list in l.clone() {
                    assert_eq!(p.owner(list), r, "list {list}");
                }
                assert_eq!(p.vectors(r).start as u64, offsets[l.start]);
                // A view of the lists' floats: the vectors times the 512-byte rows' 128 floats.
                assert_eq!(
                    p.floats(r),
                    p.vectors(r).start * 128..p.vectors(r).end * 128
                );
            }
            assert_eq!(next, nlist);
            let shares: Vec<u64> = (0..ranks).map(|r| p.bytes(r) / 512).collect();
            assert!(
                within_one_list(&shares, &offsets),
                "{ranks} ranks: {shares:?}"
            );
            // The same inputs give the same cut.
            assert_eq!(p, Partition::of_offsets(&offsets, 512, ranks));
        }
    }
}

/// Whether every share (in vectors) is within the largest list of the mean share.
fn within_one_list(shares: &[u64], offsets: &[u64]) -> bool {
    let total = *offsets.last().unwrap() as f64;
    let biggest = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as f64;
    let mean = total / shares.len() as f64;
    shares.iter().all(|&s| (s as f64 - mean).abs() <= biggest)
}

#[test]
fn cutting_by_list_count_fails_the_balance_check_that_bytes_pass() {
    // Negative control: five small lists, then three large ones, over two ranks.
    let offsets = [0u64, 1, 2, 3, 4, 5, 1005, 2005, 3005];
    let by_count = [offsets[4], offsets[8] - offsets[4]];
    assert!(
        !within_one_list(&by_count, &offsets),
        "the check passes a cut by list count"
    );
    let p = Partition::of_offsets(&offsets, 4, 2);
    let by_bytes = [p.bytes(0) / 4, p.bytes(1) / 4];
    assert!(within_one_list(&by_bytes, &offsets), "{by_bytes:?}");
}

#[test]
fn routing_sends_each_pair_to_the_rank_that_holds_its_list() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let offsets = random_offsets(&mut rng, 100);
    for ranks in 1..=8 {
        let p = Partition::of_offsets(&offsets, 64, ranks);
        let nprobe = 5;
        let probes: Vec<u32> = (0..40 * nprobe).map(|_| rng.gen_range(0..100)).collect();
        let routes = p.route(&probes, nprobe);
        assert_eq!(routes.iter().map(Vec::len).sum::<usize>(), probes.len());
        for (r, pairs) in routes.iter().enumerate() {
            for &(q, list) in pairs {
                assert!(p.lists(r).contains(&(list as usize)));
                assert!(probes[q * nprobe..(q + 1) * nprobe].contains(&list));
            }
        }
    }
}

/// Random sorted top-`K` lists, one per (rank, query), of distinct ids, some padded with
/// empty places; returns them gathered and every candidate by query.
fn random_gathered(
    rng: &mut impl Rng,
    ranks: usize,
    nq: usize,
) -> (Vec<f32>, Vec<u32>, Vec<Vec<cpu::Hit>>) {
    let (mut d, mut i) = (
        vec![f32::INFINITY; ranks * nq * K],
        vec![u32::MAX; ranks * nq * K],
    );
    let mut all = vec![Vec::new(); nq];
    for r in 0..ranks {
        for q in 0..nq {
            let n = rng.gen_range(0..=K);
            // Coarse distances, so ties across ranks happen.
            let mut hits: Vec<cpu::Hit> = (0..n)
                .map(|j| {
                    (
                        rng.gen_range(0..20) as f32 * 0.5,
                        (r * 100_000 + q * 100 + j) as u32,
                    )
                })
                .collect();
            hits = cpu::top_k(hits, K);
            for (j, h) in hits.iter().enumerate() {
                d[(r * nq + q) * K + j] = h.0;
                i[(r * nq + q) * K + j] = h.1;
            }
            all[q].extend(hits);
        }
    }
    (d, i, all)
}

#[test]
fn the_merge_of_every_ranks_top_k_is_the_top_k_of_all() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for ranks in 1..=8 {
        let nq = 33;
        let (d, i, all) = random_gathered(&mut rng, ranks, nq);
        let (md, mi) = merge_gathered(&d, &i, ranks, nq);
        for q in 0..nq {
            let want = cpu::top_k(all[q].clone(), K);
            for j in 0..K {
                let (wd, wi) = want.get(j).copied().unwrap_or((f32::INFINITY, u32::MAX));
                assert_eq!(
                    (md[q * K + j], mi[q * K + j]),
                    (wd, wi),
                    "{ranks} ranks, query {q}, place {j}"
                );
            }
        }
    }
}

#[test]
fn a_merge_that_ignores_ids_on_ties_is_caught() {
    // Negative control for the check above: taking ranks in order on equal distances (a
    // plausible bug) differs from the kernels' order as soon as a later rank has the
    // smaller id of a tie.
    let (d, i) = (vec![1.0f32; 2 * K], [vec![9u32; K], vec![1u32; K]].concat());
    let (_, mi) = merge_gathered(&d, &i, 2, 1);
    assert_eq!(
        mi[0], 1,
        "ties go to the smaller id, whichever rank holds it"
    );
}

#[test]
fn every_ranks_emulated_search_merges_into_the_whole_index_answer() {
    let s = seed();
    let spec = Synthetic {
        dim: 16,
        nlist: 24,
        vectors: 3000,
        spread: 1.0,
        sigma: 0.6,
        seed: s,
    };
    let layout = spec.layout();
    let mut lists = vec![0.0; spec.vectors * spec.dim];
    spec.fill(&layout.offsets, 0, &mut lists);
    let queries = spec.queries(16, 1);
    let emu = Emulator::new();
    let params = EmulatedParams {
        nprobe: 5,
        ..EmulatedParams::default()
    };
    let whole = emulated::search(
        &emu,
        &layout,
        &lists,
        &queries,
        params,
        RingQueue::disabled(),
    )
    .unwrap();
    for ranks in 1..=8 {
        // Every other rank count through the GPU-driven pull (its cache and copy warps over
        // shards whose other lists are empty), the others through the plain scan.
        let params = EmulatedParams {
            pull: ranks % 2 == 0,
            ..params
        };
        let p = Partition::by_bytes(&layout, ranks);
        let (mut d, mut i) = (Vec::new(), Vec::new());
        for r in 0..ranks {
            let shard = p.shard_layout(&layout, r);
            let v = p.vectors(r);
            let part = &lists[v.start * spec.dim..v.end * spec.dim];
            let got = emulated::search(&emu, &shard, part, &queries, params, RingQueue::disabled())
                .unwrap();
            assert!(
                got.cache_matches,
                "{ranks} ranks, rank {r}: the pull's cache"
            );
            d.extend(got.dist);
            i.extend(got.ids);
        }
        let (md, mi) = merge_gathered(&d, &i, ranks, queries.len());
        assert_eq!(mi, whole.ids, "{ranks} ranks: ids");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&md), bits(&whole.dist), "{ranks} ranks: distances");
    }
}
