//! The sharded search over two GPUs or more of one process: the NCCL all-gather (a thread per
//! GPU) and the peer-copy gather into GPU 0 both give one GPU's answer bit for bit. Needs two
//! GPUs and NCCL on the library path (`scripts/multi-gpu.sh run`); fails (never passes) with
//! fewer GPUs.

use std::time::Duration;

use lookahead_ivf::gpu::{Reads, ShardIndex};
use lookahead_ivf::shard::ranks::{PeerGather, RankSearch};
use lookahead_ivf::shard::{Partition, Synthetic};
use lookahead_multi::{Communicator, GpuSet, HostArray};

#[test]
#[ignore = "needs two CUDA GPUs"]
fn nccl_and_peer_gathers_give_one_gpus_answer() {
    let mut set = GpuSet::all().expect("a CUDA driver and GPUs");
    assert!(set.len() >= 2, "needs two GPUs, found {}", set.len());
    set.enable_peer_access().unwrap();
    let spec = Synthetic {
        dim: 96,
        nlist: 512,
        vectors: 400_000,
        spread: 1.0,
        sigma: 0.5,
        seed: 11,
    };
    let layout = spec.layout();
    let lists = HostArray::<f32>::from_rows(set.gpus(), spec.vectors, spec.dim, |first, rows| {
        spec.fill(&layout.offsets, first, rows)
    })
    .unwrap();
    let (nq, nprobe) = (200, 16);
    let queries = spec.queries(nq, 1);
    let g0 = set.gpu(0);
    let s0 = g0.context().new_stream().unwrap();
    let mut one = ShardIndex::new(
        g0,
        &s0,
        layout.clone(),
        lists.view(g0, 0..lists.len()).unwrap(),
        Reads::Pull,
    )
    .unwrap();
    let want = one.search(&queries.data, nprobe).unwrap();
    drop(one);

    let p = Partition::by_bytes(&layout, set.len());
    let streams: Vec<_> = set
        .gpus()
        .iter()
        .map(|g| g.context().new_stream().unwrap())
        .collect();
    let mut shards = Vec::new();
    for (r, gpu) in set.gpus().iter().enumerate() {
        let view = lists.view(gpu, p.floats(r)).unwrap();
        shards.push(
            ShardIndex::new(
                gpu,
                &streams[r],
                p.shard_layout(&layout, r),
                view,
                Reads::Pull,
            )
            .unwrap(),
        );
    }
    let comms = Communicator::init_all(set.gpus(), &streams, Duration::from_secs(60)).unwrap();
    let ranks: Vec<_> = shards
        .into_iter()
        .zip(comms)
        .map(|(s, c)| RankSearch::new(s, c).unwrap())
        .collect();
    let answers: Vec<_> = std::thread::scope(|sc| {
        let handles: Vec<_> = ranks
            .into_iter()
            .enumerate()
            .map(|(r, mut rs)| {
                let q = (r == 0).then_some(queries.data.as_slice());
                sc.spawn(move || {
                    let (cold, _) = rs.search(q, nq, nprobe).unwrap();
                    let (warm, _) = rs.search(q, nq, nprobe).unwrap();
                    (rs.into_parts().0, cold, warm)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut shards = Vec::new();
    for (r, (shard, cold, warm)) in answers.into_iter().enumerate() {
        if r == 0 {
            assert_eq!(cold.as_ref(), Some(&want), "NCCL, cold");
            assert_eq!(warm.as_ref(), Some(&want), "NCCL, warm");
        } else {
            assert!(cold.is_none() && warm.is_none(), "only rank 0 merges");
        }
        shards.push(shard);
    }
    let mut gather = PeerGather::new(&shards).unwrap();
    let (got, _) = gather
        .search(&mut shards, &queries.data, nq, nprobe)
        .unwrap();
    assert_eq!(got, Some(want), "peer copies");
}
