//! The copy rates the searches are measured against, in the same run: pinned host to device
//! for each GPU alone and for all at once (each over its own host link), and GPU to GPU.

use std::sync::Barrier;
use std::time::Instant;

use cudarc::driver::{sys, CudaSlice, DevicePtrMut};
use lookahead::{DriverContext, Gpu};
use lookahead_multi::GpuSet;

use crate::Res;

/// Copies of each timing.
const REPEATS: usize = 3;

/// GB/s of `REPEATS` copies of `bytes` from `host` (page-locked) to `gpu`, timed from the
/// moment `start` returns (after an untimed copy) to the last copy's end.
pub(crate) fn pinned_rate(gpu: &Gpu, host: &[f32], bytes: usize, start: impl FnOnce()) -> Res<f64> {
    gpu.bind_to_thread()?;
    let bytes = bytes.min(std::mem::size_of_val(host)) & !63;
    let stream = gpu.context().new_stream().during("cuStreamCreate")?;
    // SAFETY: written by the copies before anything reads it (nothing does).
    let mut dst: CudaSlice<u8> = unsafe { stream.alloc(bytes.max(64)) }.during("cuMemAlloc")?;
    let copy = |dst: &mut CudaSlice<u8>| -> Res<()> {
        let (d, _g) = dst.device_ptr_mut(&stream);
        // SAFETY: `bytes` of registered host memory to `bytes` of device memory, on `stream`.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(d, host.as_ptr() as *const _, bytes, stream.cu_stream())
        }
        .result()
        .during("cuMemcpyHtoDAsync")?;
        Ok(())
    };
    copy(&mut dst)?;
    stream.synchronize().during("cuStreamSynchronize")?;
    start();
    let t = Instant::now();
    for _ in 0..REPEATS {
        copy(&mut dst)?;
    }
    stream.synchronize().during("cuStreamSynchronize")?;
    Ok((bytes * REPEATS) as f64 / t.elapsed().as_secs_f64() / 1e9)
}

/// Each GPU's pinned rate alone (one after another), then every GPU's while all copy at
/// once (GB/s, by position), GPU `i` copying `bytes` from the start of `hosts[i]` (its own
/// shard's memory, as its searches read).
pub(crate) fn pinned_rates(
    set: &GpuSet,
    hosts: &[&[f32]],
    bytes: usize,
) -> Res<(Vec<f64>, Vec<f64>)> {
    let mut alone = Vec::new();
    for (gpu, host) in set.gpus().iter().zip(hosts) {
        alone.push(pinned_rate(gpu, host, bytes, || ())?);
    }
    let barrier = Barrier::new(set.len());
    let together = set.on_each(|i, gpu| {
        pinned_rate(gpu, hosts[i], bytes, || {
            barrier.wait();
        })
        .map_err(|e| e.to_string())
    });
    let together = together.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((alone, together))
}

/// GB/s of copying 1 GiB from GPU `from` to GPU `to` of `set` (`cuMemcpyPeerAsync`), or
/// `None` with one GPU.
pub(crate) fn peer_rate(set: &GpuSet, from: usize, to: usize) -> Res<Option<f64>> {
    if set.len() < 2 {
        return Ok(None);
    }
    let bytes = 1usize << 30;
    let (gf, gt) = (set.gpu(from), set.gpu(to));
    gf.bind_to_thread()?;
    let src = gf.stream().alloc_zeros::<u8>(bytes).during("cuMemAlloc")?;
    gt.bind_to_thread()?;
    let s = gt.context().new_stream().during("cuStreamCreate")?;
    let mut dst = s.alloc_zeros::<u8>(bytes).during("cuMemAlloc")?;
    gf.synchronize()?;
    s.synchronize().during("cuStreamSynchronize")?;
    let mut copy = || -> Res<()> {
        // SAFETY: nothing writes `src` (synchronised above; the copies are waited for below).
        unsafe { lookahead_multi::set::copy_peer_slices(&mut dst, gt, &src, gf, &s)? };
        Ok(())
    };
    copy()?;
    s.synchronize().during("cuStreamSynchronize")?;
    let t = Instant::now();
    for _ in 0..REPEATS {
        copy()?;
    }
    s.synchronize().during("cuStreamSynchronize")?;
    Ok(Some(
        (bytes * REPEATS) as f64 / t.elapsed().as_secs_f64() / 1e9,
    ))
}
