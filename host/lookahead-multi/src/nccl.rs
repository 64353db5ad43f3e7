//! NCCL communicators that cannot hang a run: made non-blocking (`blocking = 0` in
//! `ncclConfig_t`), every set-up and every collective waited for with a deadline while the
//! communicator's asynchronous error is polled, and aborted (`ncclCommAbort`, which ends its
//! kernels) when a peer fails or the deadline passes. The error names the rank that waited.
//!
//! One communicator per rank process ([`Communicator::init_rank`], the unique id handed
//! over by [`crate::rendezvous`]), or one per GPU of this process
//! ([`Communicator::init_all`], for one thread per GPU). The library is loaded at run time
//! (cudarc's `nccl` bindings); where it is missing every call returns
//! [`Error::NcclMissing`].

use std::ffi::{c_void, CStr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{sys as cu, CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::sys as nc;
use cudarc::nccl::NcclType;
use lookahead::{DriverContext, Gpu};

use crate::error::{Error, Result};

/// The `ncclConfig_t` layout cudarc's bindings have (NCCL 2.30), as `NCCL_VERSION` codes it.
const CONFIG_VERSION: u32 = 23000;
/// `NCCL_CONFIG_UNDEF_INT`: a field left to NCCL's default.
const UNDEF: i32 = i32::MIN;

/// Whether the library loads, and its version as (major, minor, patch).
pub fn version() -> Result<(u32, u32, u32)> {
    library()?;
    let mut v = 0;
    // SAFETY: writes one int.
    let r = unsafe { nc::ncclGetVersion(&mut v) };
    check(0, "ncclGetVersion", r, None)?;
    let v = v as u32;
    Ok((v / 10000, (v % 10000) / 100, v % 100))
}

fn library() -> Result<()> {
    // SAFETY: only tries to load the library.
    if unsafe { nc::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::NcclMissing)
    }
}

/// The id all ranks of one communicator share: made by one rank, sent to the others.
#[derive(Clone, Copy)]
pub struct UniqueId(nc::ncclUniqueId);

impl UniqueId {
    /// A new id (`ncclGetUniqueId`: also starts NCCL's bootstrap listener on this host).
    pub fn new() -> Result<Self> {
        library()?;
        let mut id = nc::ncclUniqueId { internal: [0; 128] };
        // SAFETY: writes the id.
        let r = unsafe { nc::ncclGetUniqueId(&mut id) };
        check(0, "ncclGetUniqueId", r, None)?;
        Ok(UniqueId(id))
    }

    /// Its 128 bytes, to send.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.internal.iter().map(|&c| c as u8).collect()
    }

    /// The id sent as `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != 128 {
            return Err(Error::Invalid(format!(
                "an NCCL unique id is 128 bytes, got {}",
                bytes.len()
            )));
        }
        let mut id = nc::ncclUniqueId { internal: [0; 128] };
        for (d, &b) in id.internal.iter_mut().zip(bytes) {
            *d = b as std::ffi::c_char;
        }
        Ok(UniqueId(id))
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueId(..)")
    }
}

/// One rank's non-blocking communicator, on one GPU and one stream.
#[derive(Debug)]
pub struct Communicator {
    comm: nc::ncclComm_t,
    rank: usize,
    world: usize,
    gpu: Gpu,
    stream: Arc<CudaStream>,
    timeout: Duration,
    aborted: bool,
}

// SAFETY: the communicator is used by one thread at a time (`&mut` or `&` from the thread
// that owns it); NCCL allows a communicator to move between threads.
unsafe impl Send for Communicator {}

fn config() -> nc::ncclConfig_t {
    nc::ncclConfig_t {
        size: std::mem::size_of::<nc::ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: CONFIG_VERSION,
        blocking: 0,
        cgaClusterSize: UNDEF,
        minCTAs: UNDEF,
        maxCTAs: UNDEF,
        netName: std::ptr::null(),
        splitShare: UNDEF,
        trafficClass: UNDEF,
        commName: std::ptr::null(),
        collnetEnable: UNDEF,
        CTAPolicy: UNDEF,
        shrinkShare: UNDEF,
        nvlsCTAs: UNDEF,
        nChannelsPerNetPeer: UNDEF,
        nvlinkCentricSched: UNDEF,
        graphUsageMode: UNDEF,
        numRmaCtx: UNDEF,
        maxP2pPeers: UNDEF,
    }
}

impl Communicator {
    /// Rank `rank` of `world` on `gpu`, its collectives on `stream`, every wait bounded by
    /// `timeout`. Every rank calls this with the same `id` (one process per rank, or one
    /// thread per rank).
    pub fn init_rank(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        id: &UniqueId,
        rank: usize,
        world: usize,
        timeout: Duration,
    ) -> Result<Self> {
        library()?;
        gpu.bind_to_thread()?;
        let mut cfg = config();
        let mut comm: nc::ncclComm_t = std::ptr::null_mut();
        // SAFETY: writes the communicator; `cfg` outlives the call (copied by NCCL).
        let r = unsafe {
            nc::ncclCommInitRankConfig(&mut comm, world as i32, id.0, rank as i32, &mut cfg)
        };
        check(rank, "ncclCommInitRankConfig", r, None)?;
        let mut c = Communicator::wrap(comm, gpu, stream, rank, world, timeout);
        c.settle("ncclCommInitRankConfig")?;
        Ok(c)
    }

    /// A communicator for each GPU of this process (rank = position), made together in one
    /// NCCL group from one new id; each is then used by its own thread.
    pub fn init_all(
        gpus: &[Gpu],
        streams: &[Arc<CudaStream>],
        timeout: Duration,
    ) -> Result<Vec<Self>> {
        if gpus.is_empty() || gpus.len() != streams.len() {
            return Err(Error::Invalid(format!(
                "{} GPUs and {} streams for one communicator each",
                gpus.len(),
                streams.len()
            )));
        }
        let id = UniqueId::new()?;
        let world = gpus.len();
        let mut comms = vec![std::ptr::null_mut(); world];
        // SAFETY: no arguments; paired with the group end below.
        check(0, "ncclGroupStart", unsafe { nc::ncclGroupStart() }, None)?;
        for (rank, gpu) in gpus.iter().enumerate() {
            gpu.bind_to_thread()?;
            let mut cfg = config();
            // SAFETY: writes `comms[rank]`; inside a group, completed by the group end.
            let r = unsafe {
                nc::ncclCommInitRankConfig(
                    &mut comms[rank],
                    world as i32,
                    id.0,
                    rank as i32,
                    &mut cfg,
                )
            };
            check(rank, "ncclCommInitRankConfig", r, None)?;
        }
        // SAFETY: ends the group started above.
        check(0, "ncclGroupEnd", unsafe { nc::ncclGroupEnd() }, None)?;
        let mut all: Vec<Communicator> = comms
            .into_iter()
            .enumerate()
            .map(|(rank, c)| {
                Communicator::wrap(c, &gpus[rank], &streams[rank], rank, world, timeout)
            })
            .collect();
        for c in &mut all {
            c.settle("ncclCommInitRankConfig")?;
        }
        Ok(all)
    }

    fn wrap(
        comm: nc::ncclComm_t,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        rank: usize,
        world: usize,
        timeout: Duration,
    ) -> Self {
        Communicator {
            comm,
            rank,
            world,
            gpu: gpu.clone(),
            stream: stream.clone(),
            timeout,
            aborted: false,
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks.
    pub fn world(&self) -> usize {
        self.world
    }

    /// The stream its collectives run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Queues an all-gather: every rank's `send` (the same length on each) into `recv`,
    /// rank by rank (`recv` holds `world` times `send`). Wait with [`Communicator::wait`].
    pub fn all_gather<T: NcclType>(
        &mut self,
        send: &impl DevicePtr<T>,
        recv: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        let count = send.len();
        if recv.len() < count * self.world {
            return Err(Error::Invalid(format!(
                "rank {}: all-gather of {count} elements a rank into {} ({} ranks)",
                self.rank,
                recv.len(),
                self.world
            )));
        }
        self.gpu.bind_to_thread()?;
        // The guards record the buffers' use on the stream once NCCL has queued its work
        // (after `enqueued`), so later frees and reads wait for the collective.
        let stream = self.stream.clone();
        let (src, _s) = send.device_ptr(&stream);
        let (dst, _d) = recv.device_ptr_mut(&stream);
        // SAFETY: `count` elements at `src`, `world * count` at `dst`, both alive until the
        // guards record their use on the stream; the communicator is alive.
        let r = unsafe {
            nc::ncclAllGather(
                src as *const c_void,
                dst as *mut c_void,
                count,
                T::as_nccl_type(),
                self.comm,
                stream.cu_stream() as nc::cudaStream_t,
            )
        };
        self.enqueued("ncclAllGather", r)
    }

    /// Queues a broadcast of `buf` from `root` to every rank's `buf`. Wait with
    /// [`Communicator::wait`].
    pub fn broadcast<T: NcclType>(
        &mut self,
        buf: &mut impl DevicePtrMut<T>,
        root: usize,
    ) -> Result<()> {
        self.gpu.bind_to_thread()?;
        let count = buf.len();
        let stream = self.stream.clone();
        let (ptr, _g) = buf.device_ptr_mut(&stream);
        // SAFETY: `count` elements at `ptr`, in place; alive until the guard records its use.
        let r = unsafe {
            nc::ncclBroadcast(
                ptr as *const c_void,
                ptr as *mut c_void,
                count,
                T::as_nccl_type(),
                root as i32,
                self.comm,
                stream.cu_stream() as nc::cudaStream_t,
            )
        };
        self.enqueued("ncclBroadcast", r)
    }

    /// Waits until everything queued on the communicator's stream has finished, `op` naming
    /// what for the error. A communicator error, or the deadline passing, aborts it.
    pub fn wait(&mut self, op: &str) -> Result<()> {
        self.gpu.bind_to_thread()?;
        let stream = self.stream.clone();
        self.poll(op, |c| {
            // SAFETY: the stream is alive (held).
            match unsafe { cu::cuStreamQuery(stream.cu_stream()) } {
                cu::CUresult::CUDA_SUCCESS => Ok(true),
                cu::CUresult::CUDA_ERROR_NOT_READY => c.async_error(op).map(|_| false),
                other => {
                    other.result().during("cuStreamQuery")?;
                    Ok(true)
                }
            }
        })
    }

    /// Polls `ready` until it says so, within the deadline; its error or the deadline aborts
    /// the communicator and names this rank.
    fn poll(&mut self, op: &str, mut ready: impl FnMut(&Self) -> Result<bool>) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match ready(self) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    self.abort();
                    return Err(e);
                }
            }
            if Instant::now() >= deadline {
                self.abort();
                return Err(Error::Timeout {
                    rank: self.rank,
                    op: op.to_string(),
                    seconds: self.timeout.as_secs_f64(),
                });
            }
            std::thread::yield_now();
        }
    }

    /// `ncclCommGetAsyncError`: `Ok(true)` while an operation is still being queued.
    fn async_error(&self, op: &str) -> Result<bool> {
        let mut e = nc::ncclResult_t::ncclSuccess;
        // SAFETY: writes one result; the communicator is alive.
        let r = unsafe { nc::ncclCommGetAsyncError(self.comm, &mut e) };
        check(self.rank, "ncclCommGetAsyncError", r, Some(self.comm))?;
        match e {
            nc::ncclResult_t::ncclSuccess => Ok(false),
            nc::ncclResult_t::ncclInProgress => Ok(true),
            other => Err(Error::Nccl {
                rank: self.rank,
                call: "a collective",
                code: describe(other, Some(self.comm)) + &format!(" (during {op})"),
            }),
        }
    }

    /// After a non-blocking call that returned `r`: an error, or waits until NCCL has taken
    /// the call (no longer in progress), which must happen before the next call.
    fn enqueued(&mut self, call: &'static str, r: nc::ncclResult_t) -> Result<()> {
        check(self.rank, call, r, Some(self.comm))?;
        self.settle(call)
    }

    /// Polls the asynchronous error until nothing is in progress, within the deadline; an
    /// error or the deadline aborts the communicator.
    fn settle(&mut self, call: &'static str) -> Result<()> {
        self.poll(call, |c| {
            c.async_error(call).map(|in_progress| !in_progress)
        })
    }

    fn abort(&mut self) {
        if !self.aborted {
            self.aborted = true;
            let _ = self.gpu.bind_to_thread();
            // SAFETY: the communicator is alive and not used again.
            unsafe { nc::ncclCommAbort(self.comm) };
        }
    }
}

impl Drop for Communicator {
    /// Aborts the communicator: local to this rank, so a peer that is gone cannot hold it
    /// up (`ncclCommFinalize` would wait for the peers). Its work has finished by then, as
    /// every collective is waited for.
    fn drop(&mut self) {
        if !self.comm.is_null() {
            self.abort();
        }
    }
}

/// `Ok` for success or in-progress, else [`Error::Nccl`] naming `rank` and `call`.
fn check(
    rank: usize,
    call: &'static str,
    r: nc::ncclResult_t,
    comm: Option<nc::ncclComm_t>,
) -> Result<()> {
    match r {
        nc::ncclResult_t::ncclSuccess | nc::ncclResult_t::ncclInProgress => Ok(()),
        other => Err(Error::Nccl {
            rank,
            call,
            code: describe(other, comm),
        }),
    }
}

/// The result's name, NCCL's text for it, and the communicator's last error message.
fn describe(r: nc::ncclResult_t, comm: Option<nc::ncclComm_t>) -> String {
    // SAFETY: NCCL returns static NUL-terminated strings (or null).
    let text = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: takes a result code; the library is loaded (a call returned `r`).
    let mut s = format!("{r:?}: {}", text(unsafe { nc::ncclGetErrorString(r) }));
    if let Some(c) = comm {
        // SAFETY: the communicator is alive.
        let last = text(unsafe { nc::ncclGetLastError(c) });
        if !last.is_empty() {
            s += &format!(" ({last})");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the library loads (a GPU machine with NCCL), its version is read; where it does
    /// not (CI), every call is `NcclMissing`, not a panic.
    #[test]
    fn without_the_library_every_call_is_an_error_not_a_panic() {
        // SAFETY: only tries to load the library.
        if unsafe { nc::is_culib_present() } {
            let v = version();
            assert!(v.is_ok(), "libnccl loads, yet its version is {v:?}");
            return;
        }
        assert!(matches!(UniqueId::new(), Err(Error::NcclMissing)));
        assert!(matches!(version(), Err(Error::NcclMissing)));
        let msg = Error::NcclMissing.to_string();
        assert!(
            msg.contains("libnccl.so") && msg.contains("LD_LIBRARY_PATH"),
            "{msg}"
        );
    }

    #[test]
    fn the_config_asks_for_a_non_blocking_communicator_and_leaves_the_rest_to_nccl() {
        let c = config();
        assert_eq!(c.size, std::mem::size_of::<nc::ncclConfig_t>());
        assert_eq!((c.magic, c.blocking), (0xcafe_beef, 0));
        assert_eq!((c.minCTAs, c.maxCTAs, c.splitShare), (UNDEF, UNDEF, UNDEF));
        assert!(c.netName.is_null() && c.commName.is_null());
    }

    #[test]
    fn unique_ids_travel_as_their_128_bytes() {
        let bytes: Vec<u8> = (0..128u8).collect();
        assert_eq!(UniqueId::from_bytes(&bytes).unwrap().to_bytes(), bytes);
        assert!(matches!(
            UniqueId::from_bytes(&bytes[..100]),
            Err(Error::Invalid(_))
        ));
    }
}
