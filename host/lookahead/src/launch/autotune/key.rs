//! What a tuning is kept for: the device, the kernel (its PTX), the launch shape and the
//! size of the data.

use std::sync::Mutex;

use super::lock;
use crate::launch::decisions;
use crate::launch::{LaunchConfig, LaunchOn};

/// What a tuning is kept for: one kernel (its name in one PTX table) on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TuneKey {
    /// The CUDA device ordinal.
    pub device: usize,
    /// The address of the kernel crate's PTX table (two crates may have kernels of the
    /// same name).
    pub source: usize,
    /// The kernel's name (its plain entry).
    pub kernel: &'static str,
    /// Threads per block and blocks rounded up to a power of two.
    pub shape: (u32, u32),
    /// The elements of the kernel's slice parameters together, rounded up to a power of
    /// two: its exponent (a grid-stride kernel keeps its grid for any size).
    pub size_log2: u32,
    /// A hash of the PTX table's text (FNV-1a), so a rebuilt kernel tunes again.
    pub ptx_hash: u64,
}

impl TuneKey {
    /// The key of the decision cache: device UUID and driver, PTX hash, kernel, shape, size.
    pub fn persistent(&self) -> String {
        format!(
            "{}|ptx-{:016x}|{}|{}x{}|n2^{}",
            device_identity(self.device),
            self.ptx_hash,
            self.kernel,
            self.shape.0,
            self.shape.1,
            self.size_log2
        )
    }
}

/// `GPU-<uuid>|driver-<version>` of device `ordinal` (read once per device).
pub(super) fn device_identity(ordinal: usize) -> String {
    static IDS: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    let mut ids = lock(&IDS);
    if let Some((_, id)) = ids.iter().find(|(o, _)| *o == ordinal) {
        return id.clone();
    }
    if !crate::gpu::driver_present() {
        return format!("ordinal{ordinal}|no-driver");
    }
    let uuid = cudarc::driver::result::device::get(ordinal as i32)
        .and_then(cudarc::driver::result::device::get_uuid)
        .map(|u| {
            u.bytes
                .iter()
                .map(|b| format!("{:02x}", *b as u8))
                .collect::<String>()
        })
        .unwrap_or_else(|_| format!("ordinal{ordinal}"));
    let mut version = 0;
    // SAFETY: an out-pointer to a local.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    let id = format!("GPU-{uuid}|driver-{version}");
    ids.push((ordinal, id.clone()));
    id
}

/// [`decisions::fnv64`] of every module of a PTX table (cached per table).
fn ptx_hash(ptx: &'static [(u32, &'static str)]) -> u64 {
    static HASHES: Mutex<Vec<(usize, u64)>> = Mutex::new(Vec::new());
    let at = ptx.as_ptr() as usize;
    let mut hashes = lock(&HASHES);
    if let Some((_, h)) = hashes.iter().find(|(a, _)| *a == at) {
        return *h;
    }
    let h = ptx.iter().fold(0u64, |acc, (cc, text)| {
        acc.rotate_left(7) ^ decisions::fnv64(text.as_bytes()) ^ *cc as u64
    });
    hashes.push((at, h));
    h
}

/// The key of `kernel` (from the PTX table `ptx`) launched on `on` with `cfg` over
/// `elements` elements of slices, or `None` on the CPU emulator.
pub fn key<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
    cfg: &LaunchConfig,
    elements: usize,
) -> Option<TuneKey> {
    on.tuning_device().map(|device| TuneKey {
        device,
        source: ptx.as_ptr() as usize,
        kernel,
        shape: shape_bucket(cfg),
        size_log2: size_bucket(elements),
        ptx_hash: ptx_hash(ptx),
    })
}

/// The size part of a tuning key: `elements` rounded up to a power of two, as its exponent.
pub fn size_bucket(elements: usize) -> u32 {
    elements
        .checked_next_power_of_two()
        .map_or(usize::BITS, usize::trailing_zeros)
}

/// The shape part of a tuning key: threads per block, and blocks rounded up to a power of
/// two (launches of similar sizes share a decision).
pub fn shape_bucket(cfg: &LaunchConfig) -> (u32, u32) {
    let (g, b) = (cfg.grid_dim, cfg.block_dim);
    let threads = b.0.saturating_mul(b.1).saturating_mul(b.2);
    let blocks = g.0.saturating_mul(g.1).saturating_mul(g.2);
    (
        threads,
        blocks.checked_next_power_of_two().unwrap_or(u32::MAX),
    )
}
