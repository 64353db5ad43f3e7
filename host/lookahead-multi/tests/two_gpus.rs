//! On a machine with two GPUs or more, and NCCL on the library path (`scripts/multi-gpu.sh
//! run` sets it up): the set and its report, host memory read by every GPU, NCCL in one
//! process, and a collective whose peer never comes ending in a named timeout. Each test fails
//! (never passes) where there are fewer than two GPUs.

use std::time::{Duration, Instant};

use cudarc::driver::{sys, DevicePtrMut};
use lookahead::DriverContext;
use lookahead_multi::{Communicator, Error, GpuSet, HostArray};

fn two_or_more() -> GpuSet {
    let set = GpuSet::all().expect("a CUDA driver and GPUs");
    assert!(set.len() >= 2, "needs two GPUs, found {}", set.len());
    set
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn the_set_enables_peer_access_and_reports_every_pair() {
    let mut set = two_or_more();
    let enabled = set.enable_peer_access().unwrap();
    let topo = set.topology().unwrap();
    println!("{}", topo.summary());
    let n = set.len();
    assert_eq!(topo.devices.len(), n);
    assert_eq!(topo.pairs.len(), n * (n - 1));
    let supported = topo.pairs.iter().filter(|p| p.access_supported).count();
    assert_eq!(
        enabled, supported,
        "every pair that supports peer access has it"
    );
    for p in &topo.pairs {
        assert_eq!(p.peer_enabled, p.access_supported, "{} -> {}", p.from, p.to);
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn host_memory_is_read_by_every_gpu() {
    let set = two_or_more();
    let rows = 1 << 16;
    let data = HostArray::<f32>::from_rows(set.gpus(), rows, 64, |first, chunk| {
        for (i, x) in chunk.iter_mut().enumerate() {
            *x = ((first * 64 + i) % 1_000_003) as f32;
        }
    })
    .unwrap();
    let results = set.on_each(|_, gpu| {
        let view = data.view(gpu, 1000..data.len()).unwrap();
        let s = gpu.stream();
        let mut dst = s.alloc_zeros::<f32>(view.len()).unwrap();
        let (d, _g) = dst.device_ptr_mut(s);
        // SAFETY: `view.len()` floats at both addresses, each valid on this GPU; waited below.
        unsafe { sys::cuMemcpyDtoDAsync_v2(d, view.device_ptr(), view.len() * 4, s.cu_stream()) }
            .result()
            .during("cuMemcpyDtoDAsync")
            .unwrap();
        drop(_g);
        s.clone_dtoh(&dst).unwrap()
    });
    for (g, got) in results.iter().enumerate() {
        assert_eq!(got.as_slice(), &data.host()[1000..], "GPU {g}");
    }
    assert!(
        data.view(set.gpu(0), 0..data.len() + 1).is_err(),
        "a view past the end"
    );
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn an_all_gather_in_one_process_gives_every_rank_every_part() {
    let set = two_or_more();
    let n = set.len();
    let streams: Vec<_> = set
        .gpus()
        .iter()
        .map(|g| g.context().new_stream().unwrap())
        .collect();
    let comms = Communicator::init_all(set.gpus(), &streams, Duration::from_secs(60)).unwrap();
    let per = 1000;
    let got: Vec<Vec<u32>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|mut comm| {
                let gpu = set.gpu(comm.rank()).clone();
                s.spawn(move || {
                    gpu.bind_to_thread().unwrap();
                    let st = comm.stream().clone();
                    let mine: Vec<u32> = (0..per)
                        .map(|i| (comm.rank() * 1_000_000 + i) as u32)
                        .collect();
                    let send = st.clone_htod(&mine).unwrap();
                    let mut recv = st.alloc_zeros::<u32>(per * comm.world()).unwrap();
                    comm.all_gather(&send, &mut recv).unwrap();
                    comm.wait("the test's all-gather").unwrap();
                    st.clone_dtoh(&recv).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let want: Vec<u32> = (0..n)
        .flat_map(|r| (0..per).map(move |i| (r * 1_000_000 + i) as u32))
        .collect();
    for (r, g) in got.iter().enumerate() {
        assert_eq!(g, &want, "rank {r}");
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_collective_whose_peer_never_comes_times_out_naming_the_rank() {
    let set = two_or_more();
    let streams: Vec<_> = set
        .gpus()
        .iter()
        .map(|g| g.context().new_stream().unwrap())
        .collect();
    let mut comms = Communicator::init_all(set.gpus(), &streams, Duration::from_secs(3)).unwrap();
    let mut zero = comms.remove(0);
    set.gpu(0).bind_to_thread().unwrap();
    let st = zero.stream().clone();
    let send = st.alloc_zeros::<f32>(256).unwrap();
    let mut recv = st.alloc_zeros::<f32>(256 * zero.world()).unwrap();
    let started = Instant::now();
    // NCCL may hold the call itself until the peer joins (a non-blocking communicator's
    // enqueue in progress), or queue it: the deadline ends whichever waits.
    let err = match zero.all_gather(&send, &mut recv) {
        Err(e) => e,
        Ok(()) => zero.wait("an all-gather rank 1 never joins").unwrap_err(),
    };
    assert!(matches!(err, Error::Timeout { rank: 0, .. }), "{err}");
    assert!(err.to_string().contains("rank 0"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The aborted communicator left nothing running: the stream finishes.
    st.synchronize().unwrap();
}
