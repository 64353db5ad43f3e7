//! # lookahead-cache
//!
//! Data bigger than the GPU, read by kernels through a cache the GPU drives: the data lives
//! in pinned host memory mapped for the GPU, and a cache of fixed-size pages in device
//! memory holds what kernels used recently. A warp that misses copies the page over the
//! interconnect itself, at the rate the GPU's own loads reach, with no host round trip and
//! no page migration; concurrent misses on one page load it once; the least recently used
//! pages (CLOCK) make room, never a page a warp is reading. The protocol is in
//! [`lookahead_device::cache`]; this crate allocates and owns the memory, hands kernels
//! their view, and reports what the cache did.
//!
//! ```no_run
//! use lookahead_cache::{CacheConfig, HostCache};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let gpu = lookahead::Gpu::new(0)?;
//! let rows: Vec<f32> = vec![0.0; 1 << 28]; // 1 GiB in host memory
//! // 256 pages of 256 KiB: 64 MiB of device memory.
//! let cache = HostCache::new(&gpu, &rows, CacheConfig::new(256 << 10, 256))?;
//! // my_kernels::gather::launch(&gpu, cfg, cache.view(), &idx, &mut out)?;
//! let stats = cache.stats()?;
//! println!("{:.1}% hits, {} bytes loaded", stats.hit_rate() * 100.0, stats.bytes_loaded);
//! # Ok(()) }
//! ```
//!
//! On the CPU emulator ([`HostCache::on_emulator`]) the same protocol runs on host memory,
//! with the same results, and the emulator's trace records every hit, miss and eviction.

mod storage;

use std::marker::PhantomData;
use std::path::Path;

use lookahead::launch::{GpuMemory, HostMemory, KernelValue, TargetMemory};
use lookahead::Gpu;
use lookahead_device::cache::HostCached;
use lookahead_device::DeviceCopy;

use storage::{
    initial_tables, parts, sum_stripes, table_words, GpuStorage, HostStorage, COUNTERS,
    COUNTER_WORDS,
};

/// What can go wrong making or using a cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The configuration cannot work; `reason` says what to change.
    #[error("invalid cache configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// The cache's device memory does not fit in the GPU's free memory.
    #[error("the cache needs {cache_bytes} bytes of device memory and the GPU has {free_bytes} free ({reserve_bytes} kept free for other work): use fewer or smaller slots")]
    DoesNotFit {
        /// Device memory the cache asked for (slots, tables, counters).
        cache_bytes: usize,
        /// Free device memory.
        free_bytes: usize,
        /// Device memory left free for the kernels' other buffers.
        reserve_bytes: usize,
    },
    /// The driver refused the pinned host allocation (the machine's RAM, or its limit on
    /// locked memory).
    #[error("pinned host memory of {bytes} bytes was refused ({source}): the data must fit in the host's RAM and its limit on locked memory (`ulimit -l`)")]
    PinnedRefused {
        /// Bytes asked for.
        bytes: usize,
        /// The driver's error.
        source: cudarc::driver::DriverError,
    },
    /// Reading file-backed data failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A GPU call failed.
    #[error(transparent)]
    Gpu(#[from] lookahead::Error),
}

/// What this crate returns.
pub type Result<T> = std::result::Result<T, CacheError>;

/// Lets `?` pass a cache's error on in a function returning [`lookahead::Result`]:
///
/// ```no_run
/// use lookahead_cache::{CacheConfig, HostCache};
/// fn run(gpu: &lookahead::Gpu, rows: &[f32]) -> lookahead::Result<()> {
///     let cache = HostCache::new(gpu, rows, CacheConfig::new(4096, 64))?;
///     println!("{:?}", cache.stats()?);
///     Ok(())
/// }
/// ```
///
/// A GPU error is passed on as it is; the others keep the cache's words (what to change) as
/// an [`lookahead::Error::InvalidArgument`] of `HostCache`, or an [`lookahead::Error::Io`].
impl From<CacheError> for lookahead::Error {
    fn from(e: CacheError) -> Self {
        match e {
            CacheError::Gpu(e) => e,
            CacheError::Io { path, source } => lookahead::Error::Io {
                what: format!("reading {path}"),
                source,
            },
            other => lookahead::Error::InvalidArgument {
                call: "HostCache",
                reason: other.to_string(),
            },
        }
    }
}

/// Which slot a miss takes when every slot holds a page: the hand goes round the slots, and
/// takes the first unpinned one its policy lets go. The default, `CountedClock { max: 4 }`,
/// loaded 10% fewer bytes than CLOCK and ran 7-13% faster on the Zipf-popular IVF list scan
/// of `host_cache_bench` (H100, driver 580.159.04; `docs/host-cache.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// The next slot the hand reaches, used or not: first in, first out.
    Fifo,
    /// CLOCK: a slot used since the hand last passed gets a second chance.
    Clock,
    /// CLOCK with a count of uses up to `max` (1 to [`Eviction::MAX_USES`]): each use adds
    /// one, each pass of the hand takes one, so a page used often survives several passes
    /// (an approximation of least-frequently-used that still ages).
    CountedClock {
        /// The most uses a slot keeps.
        max: u32,
    },
}

impl Default for Eviction {
    fn default() -> Eviction {
        Eviction::CountedClock { max: 4 }
    }
}

impl Eviction {
    /// The largest [`Eviction::CountedClock`] count.
    pub const MAX_USES: u32 = 255;

    /// The most uses a slot's count keeps under this policy (the device's `max_uses`).
    pub fn max_uses(self) -> u32 {
        match self {
            Eviction::Fifo => 0,
            Eviction::Clock => 1,
            Eviction::CountedClock { max } => max,
        }
    }
}

impl std::fmt::Display for Eviction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Eviction::Fifo => write!(f, "fifo"),
            Eviction::Clock => write!(f, "clock"),
            Eviction::CountedClock { max } => write!(f, "counted:{max}"),
        }
    }
}

impl std::str::FromStr for Eviction {
    type Err = String;

    /// `fifo`, `clock` or `counted:N` (N from 1 to [`Eviction::MAX_USES`]).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || {
            format!(
                "eviction policy `{s}`: write fifo, clock or counted:N (N from 1 to {})",
                Eviction::MAX_USES
            )
        };
        match s {
            "fifo" => Ok(Eviction::Fifo),
            "clock" => Ok(Eviction::Clock),
            _ => {
                let n = s.strip_prefix("counted:").ok_or_else(bad)?;
                let max = n.parse::<u32>().map_err(|_| bad())?;
                match (1..=Eviction::MAX_USES).contains(&max) {
                    true => Ok(Eviction::CountedClock { max }),
                    false => Err(bad()),
                }
            }
        }
    }
}

/// The cache's shape: page size and slot count, and its eviction policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes per page: a power of two, at least 512 (a warp's 16-byte loads).
    pub page_bytes: usize,
    /// Pages the cache holds (at least 1).
    pub slots: u32,
    /// Device memory a GPU cache leaves free for the kernels' other buffers.
    pub reserve_bytes: usize,
    /// Which slot a miss takes when the cache is full (`Eviction::default()` unless set).
    pub eviction: Eviction,
}

impl CacheConfig {
    /// `slots` pages of `page_bytes` each, leaving 256 MiB of device memory free.
    pub fn new(page_bytes: usize, slots: u32) -> CacheConfig {
        CacheConfig {
            page_bytes,
            slots,
            reserve_bytes: 256 << 20,
            eviction: Eviction::default(),
        }
    }

    /// The same shape with the eviction policy `eviction`.
    pub fn evicting(self, eviction: Eviction) -> CacheConfig {
        CacheConfig { eviction, ..self }
    }

    /// As many pages of `page_bytes` as fit in `capacity_bytes` (at least one).
    pub fn with_capacity(capacity_bytes: usize, page_bytes: usize) -> CacheConfig {
        let slots = (capacity_bytes / page_bytes.max(1)).clamp(1, u32::MAX as usize / 4);
        CacheConfig::new(page_bytes, slots as u32)
    }

    /// The page size as a shift of elements of `T`, or what is wrong.
    /// The page shift (log2 of elements per page) and the pages of `len` elements of `T`,
    /// or why the configuration cannot hold them.
    fn page_layout<T>(&self, len: usize) -> Result<(u32, usize)> {
        let elem = std::mem::size_of::<T>();
        let bad = |reason: String| Err(CacheError::Config { reason });
        if !self.page_bytes.is_power_of_two() || self.page_bytes < 512 {
            return bad(format!("page_bytes = {} must be a power of two of at least 512 (a warp copies a page 16 bytes per lane)", self.page_bytes));
        }
        if !elem.is_power_of_two() || elem > self.page_bytes {
            return bad(format!("elements of {elem} bytes: a page must hold a power-of-two number of them (elements of 1, 2, 4, 8 or 16 bytes)"));
        }
        if self.slots == 0 || self.slots > u32::MAX / 4 {
            return bad(format!(
                "slots = {} must be from 1 to {}",
                self.slots,
                u32::MAX / 4
            ));
        }
        if self.eviction.max_uses() > Eviction::MAX_USES {
            return bad(format!(
                "eviction {}: a slot counts at most {} uses",
                self.eviction,
                Eviction::MAX_USES
            ));
        }
        let pages = len.div_ceil(self.page_bytes / elem);
        if pages >= (u32::MAX - 2) as usize {
            return bad(format!(
                "{pages} pages is too many for the page table: use larger pages"
            ));
        }
        Ok(((self.page_bytes / elem).trailing_zeros(), pages))
    }
}

/// What the cache did, from its counters (cumulative since it was made or last reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Warp acquires that found their page resident.
    pub hits: u64,
    /// Warp acquires that loaded their page.
    pub misses: u64,
    /// Pages dropped to make room.
    pub evictions: u64,
    /// Bytes copied from host memory.
    pub bytes_loaded: u64,
    /// Acquires that waited (for a page being loaded by another warp, or for a free slot).
    pub waits: u64,
}

impl CacheStats {
    /// Hits over acquires (0 when there were none).
    pub fn hit_rate(&self) -> f64 {
        let all = self.hits + self.misses;
        if all == 0 {
            0.0
        } else {
            self.hits as f64 / all as f64
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &CacheStats) -> CacheStats {
        CacheStats {
            hits: self.hits - earlier.hits,
            misses: self.misses - earlier.misses,
            evictions: self.evictions - earlier.evictions,
            bytes_loaded: self.bytes_loaded - earlier.bytes_loaded,
            waits: self.waits - earlier.waits,
        }
    }

    /// Loaded bytes per second over `seconds`, in GB/s.
    pub fn gb_per_s(&self, seconds: f64) -> f64 {
        if seconds > 0.0 {
            self.bytes_loaded as f64 / seconds / 1e9
        } else {
            0.0
        }
    }

    fn from_counters(c: [u64; COUNTERS]) -> CacheStats {
        CacheStats {
            hits: c[0],
            misses: c[1],
            evictions: c[2],
            bytes_loaded: c[3],
            waits: c[4],
        }
    }
}

enum Storage<T> {
    Gpu(GpuStorage),
    Host(HostStorage<T>),
}

/// Data in host memory with a GPU-driven cache of it in device memory, for kernels in
/// target memory `M` ([`GpuMemory`]: a GPU; [`HostMemory`]: the CPU emulator).
pub struct HostCache<T, M: TargetMemory = GpuMemory> {
    storage: Storage<T>,
    len: usize,
    pages: usize,
    page_shift: u32,
    config: CacheConfig,
    _space: PhantomData<M>,
}

// SAFETY: the raw pointers are owned allocations only this value frees; every access by
// kernels follows the cache protocol.
unsafe impl<T: Send, M: TargetMemory> Send for HostCache<T, M> {}
// SAFETY: `&HostCache` hands out views only; the tables are updated atomically.
unsafe impl<T: Sync, M: TargetMemory> Sync for HostCache<T, M> {}

impl<T: DeviceCopy + Copy> HostCache<T, GpuMemory> {
    /// A cache on `gpu` of a copy of `data` in pinned host memory. Refuses (before
    /// allocating anything) a cache whose device memory does not fit in free GPU memory,
    /// and reports a refused pinned allocation.
    pub fn new(gpu: &Gpu, data: &[T], config: CacheConfig) -> Result<Self> {
        let cache = Self::alloc(gpu, data.len(), config)?;
        if let Storage::Gpu(g) = &cache.storage {
            // SAFETY: the pinned allocation holds `data.len()` elements of `T`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), g.pinned as *mut T, data.len()) };
        }
        Ok(cache)
    }

    /// A cache on `gpu` of `len` elements that `fill(first, chunk)` writes straight into
    /// pinned host memory, in parallel over the host's cores (`chunk` holds elements
    /// `first..first + chunk.len()`): data too big to build twice.
    pub fn from_fn(
        gpu: &Gpu,
        len: usize,
        config: CacheConfig,
        fill: impl Fn(usize, &mut [T]) + Sync,
    ) -> Result<Self> {
        let cache = Self::alloc(gpu, len, config)?;
        if let Storage::Gpu(g) = &cache.storage {
            let base = g.pinned as usize;
            let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
            let chunk = len.div_ceil(threads).max(1);
            std::thread::scope(|s| {
                for first in (0..len).step_by(chunk) {
                    let (fill, n) = (&fill, chunk.min(len - first));
                    s.spawn(move || {
                        let p = (base as *mut T).wrapping_add(first);
                        // SAFETY: elements `first..first + n` of the pinned allocation, this
                        // thread's alone; zeroed first, and zero is a valid `T: DeviceCopy`.
                        let c = unsafe {
                            std::ptr::write_bytes(p, 0, n);
                            std::slice::from_raw_parts_mut(p, n)
                        };
                        fill(first, c)
                    });
                }
            });
        }
        Ok(cache)
    }

    /// A cache on `gpu` of the file at `path`, read as elements of `T` straight into pinned
    /// host memory (the file's length must be a multiple of `T`'s size).
    pub fn from_file(gpu: &Gpu, path: &Path, config: CacheConfig) -> Result<Self> {
        use std::io::Read;
        let io = |source| CacheError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let bytes = file.metadata().map_err(io)?.len() as usize;
        let elem = std::mem::size_of::<T>();
        if bytes % elem != 0 {
            return Err(CacheError::Config {
                reason: format!(
                    "{} is {bytes} bytes, not a whole number of {elem}-byte elements",
                    path.display()
                ),
            });
        }
        let cache = Self::alloc(gpu, bytes / elem, config)?;
        if let Storage::Gpu(g) = &cache.storage {
            // SAFETY: the pinned allocation holds `bytes` bytes, zeroed before the slice is
            // made; `T: DeviceCopy` is valid for every bit pattern.
            let dst = unsafe {
                std::ptr::write_bytes(g.pinned as *mut u8, 0, bytes);
                std::slice::from_raw_parts_mut(g.pinned as *mut u8, bytes)
            };
            file.read_exact(dst).map_err(io)?;
        }
        Ok(cache)
    }

    fn alloc(gpu: &Gpu, len: usize, config: CacheConfig) -> Result<Self> {
        let (page_shift, pages) = config.page_layout::<T>(len)?;
        let tables = initial_tables(pages, config.slots);
        let elem = std::mem::size_of::<T>();
        let g = GpuStorage::new(
            gpu,
            len * elem,
            config.slots as usize * config.page_bytes,
            &tables,
            config.reserve_bytes,
        )?;
        Ok(HostCache {
            storage: Storage::Gpu(g),
            len,
            pages,
            page_shift,
            config,
            _space: PhantomData,
        })
    }

    /// The view a kernel takes as its `HostCached<T>` parameter (borrowing the cache, so it
    /// outlives the launch; dropping the cache waits for the GPU).
    pub fn view(&self) -> CacheView<'_, T, GpuMemory> {
        let Storage::Gpu(g) = &self.storage else {
            unreachable!("a GPU cache has GPU storage")
        };
        let p = parts(
            g.backing as *const T,
            self.len,
            g.data as *mut T,
            g.tables as *mut u32,
            g.counters as *mut u64,
            (self.pages, self.config.slots, self.page_shift),
            self.config.eviction,
        );
        // SAFETY: every part is an allocation of this cache, sized by `alloc`, alive while
        // the view borrows it; the tables started consistent (`initial_tables`).
        CacheView::new(unsafe { HostCached::from_raw_parts(p) })
    }

    /// Gives the cache a new shape (page size, slots), empty, keeping the data in host
    /// memory: waits for every kernel, frees the old slots and tables, allocates the new
    /// ones. A shape that does not fit is refused and the old one kept.
    pub fn reshape(&mut self, config: CacheConfig) -> Result<()> {
        let (page_shift, pages) = config.page_layout::<T>(self.len)?;
        let tables = initial_tables(pages, config.slots);
        if let Storage::Gpu(g) = &mut self.storage {
            g.reshape(
                config.slots as usize * config.page_bytes,
                &tables,
                config.reserve_bytes,
            )?;
        }
        (self.config, self.page_shift, self.pages) = (config, page_shift, pages);
        Ok(())
    }
}

impl<T: DeviceCopy + Copy> HostCache<T, HostMemory> {
    /// A cache of a copy of `data` for kernels on the CPU emulator: the same protocol on host
    /// memory.
    pub fn on_emulator(data: &[T], config: CacheConfig) -> Result<Self> {
        let (page_shift, pages) = config.page_layout::<T>(data.len())?;
        let slot_elems = config.slots as usize * (config.page_bytes / std::mem::size_of::<T>());
        let h = HostStorage {
            backing: data.to_vec(),
            // SAFETY: zero bits are a valid `T: DeviceCopy` (every bit pattern is).
            data: (0..slot_elems)
                .map(|_| std::cell::UnsafeCell::new(unsafe { std::mem::zeroed() }))
                .collect(),
            tables: initial_tables(pages, config.slots)
                .into_iter()
                .map(Into::into)
                .collect(),
            counters: (0..COUNTER_WORDS).map(|_| 0.into()).collect(),
        };
        Ok(HostCache {
            storage: Storage::Host(h),
            len: data.len(),
            pages,
            page_shift,
            config,
            _space: PhantomData,
        })
    }

    /// The view an emulated kernel takes as its `HostCached<T>` parameter.
    pub fn view(&self) -> CacheView<'_, T, HostMemory> {
        let Storage::Host(h) = &self.storage else {
            unreachable!("an emulated cache has host storage")
        };
        let p = parts(
            h.backing.as_ptr(),
            self.len,
            std::cell::UnsafeCell::raw_get(h.data.as_ptr()),
            h.tables.as_ptr() as *mut u32,
            h.counters.as_ptr() as *mut u64,
            (self.pages, self.config.slots, self.page_shift),
            self.config.eviction,
        );
        // SAFETY: as for the GPU view; the tables and slots are interior-mutable host memory.
        CacheView::new(unsafe { HostCached::from_raw_parts(p) })
    }
}

impl<T: DeviceCopy + Copy, M: TargetMemory> HostCache<T, M> {
    /// The data in host memory (read-only: it must not change while pages of it are cached).
    pub fn data(&self) -> &[T] {
        match &self.storage {
            // SAFETY: the pinned allocation holds `len` initialised elements.
            Storage::Gpu(g) => unsafe {
                std::slice::from_raw_parts(g.pinned as *const T, self.len)
            },
            Storage::Host(h) => &h.backing,
        }
    }

    /// Elements of the data.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the data is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pages of the data.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// The configuration it was made with.
    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// Bytes of device memory its slots take.
    pub fn capacity_bytes(&self) -> usize {
        self.config.slots as usize * self.config.page_bytes
    }

    /// The counters, after waiting for every kernel of the GPU.
    pub fn stats(&self) -> Result<CacheStats> {
        let c = match &self.storage {
            Storage::Gpu(g) => g.counters()?,
            Storage::Host(h) => {
                let words: Vec<u64> = (h.counters.iter())
                    .map(|c| c.load(std::sync::atomic::Ordering::SeqCst))
                    .collect();
                sum_stripes(&words)
            }
        };
        Ok(CacheStats::from_counters(c))
    }

    /// Which pages are resident, by slot (`None`: the slot is empty), after waiting for
    /// every kernel.
    pub fn resident(&self) -> Result<Vec<Option<u32>>> {
        let words = table_words(self.pages, self.config.slots);
        let t: Vec<u32> = match &self.storage {
            Storage::Gpu(g) => g.tables(words)?,
            Storage::Host(h) => h
                .tables
                .iter()
                .map(|w| w.load(std::sync::atomic::Ordering::SeqCst))
                .collect(),
        };
        let slot_page = &t[self.pages..self.pages + self.config.slots as usize];
        Ok(slot_page
            .iter()
            .map(|&p| (p != lookahead_device::cache::ABSENT).then_some(p))
            .collect())
    }

    /// Empties the cache and zeroes its counters (waits for every kernel first; `&mut`: no
    /// view may be in use).
    pub fn clear(&mut self) -> Result<()> {
        let tables = initial_tables(self.pages, self.config.slots);
        match &mut self.storage {
            Storage::Gpu(g) => g.reset(&tables)?,
            Storage::Host(h) => {
                for (w, v) in h.tables.iter_mut().zip(tables) {
                    *w.get_mut() = v;
                }
                h.counters.iter_mut().for_each(|c| *c.get_mut() = 0);
            }
        }
        Ok(())
    }
}

/// A kernel argument for a `HostCached<T>` parameter, borrowing its [`HostCache`].
#[derive(Debug, Clone, Copy)]
pub struct CacheView<'a, T, M> {
    view: HostCached<T>,
    _cache: PhantomData<(&'a (), M)>,
}

impl<T, M> CacheView<'_, T, M> {
    fn new(view: HostCached<T>) -> Self {
        CacheView {
            view,
            _cache: PhantomData,
        }
    }
}

impl<T: Copy + 'static, M: TargetMemory> KernelValue<HostCached<T>, M> for CacheView<'_, T, M> {
    fn bind<'b>(self, _args: &mut M::Args<'b>) -> HostCached<T>
    where
        Self: 'b,
    {
        self.view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_policies_parse_and_print() {
        for text in ["fifo", "clock", "counted:4"] {
            assert_eq!(text.parse::<Eviction>().unwrap().to_string(), text);
        }
        assert_eq!(Eviction::default(), Eviction::CountedClock { max: 4 });
        for bad in ["lru", "counted:0", "counted:256", "counted:x"] {
            let e = bad.parse::<Eviction>().unwrap_err();
            assert!(e.contains("fifo, clock or counted:N"), "{e}");
        }
    }

    #[test]
    fn configurations_are_checked_with_a_reason() {
        let e = |c: CacheConfig| c.page_layout::<f32>(1 << 20).unwrap_err().to_string();
        let many = CacheConfig::new(512, 4).evicting(Eviction::CountedClock { max: 300 });
        assert!(e(many).contains("at most 255 uses"));
        assert!(e(CacheConfig::new(1000, 4)).contains("power of two"));
        assert!(e(CacheConfig::new(256, 4)).contains("at least 512"));
        assert!(e(CacheConfig::new(4096, 0)).contains("slots = 0"));
        assert_eq!(
            CacheConfig::new(4096, 4).page_layout::<f32>(10).unwrap(),
            (10, 1)
        );
        assert_eq!(CacheConfig::with_capacity(1 << 20, 4096).slots, 256);
        let e = CacheConfig::new(4096, 1)
            .page_layout::<[u8; 3]>(10)
            .unwrap_err();
        assert!(e.to_string().contains("power-of-two number"), "{e}");
    }

    #[test]
    fn stats_rates_and_differences() {
        let a = CacheStats {
            hits: 3,
            misses: 1,
            evictions: 0,
            bytes_loaded: 4096,
            waits: 0,
        };
        assert_eq!(a.hit_rate(), 0.75);
        assert_eq!(a.since(&a), CacheStats::default());
        assert_eq!(a.gb_per_s(1e-6), 4.096);
        assert_eq!(CacheStats::default().hit_rate(), 0.0);
    }

    #[test]
    fn cache_errors_convert_into_the_runtime_error_keeping_their_words() {
        fn open(e: CacheError) -> lookahead::Result<()> {
            Err(e)?
        }
        let e = open(CacheError::DoesNotFit {
            cache_bytes: 10,
            free_bytes: 4,
            reserve_bytes: 1,
        })
        .unwrap_err();
        assert!(
            matches!(
                &e,
                lookahead::Error::InvalidArgument {
                    call: "HostCache",
                    ..
                }
            ) && e.to_string().contains("use fewer or smaller slots"),
            "{e}"
        );
        let e = open(CacheError::Config {
            reason: "slots = 0".into(),
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "HostCache: invalid cache configuration: slots = 0"
        );
        let e = open(CacheError::Io {
            path: "/x".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
        .unwrap_err();
        assert!(
            matches!(&e, lookahead::Error::Io { what, .. } if what == "reading /x"),
            "{e}"
        );
        let gpu = lookahead::Error::NoDriver;
        let e = open(CacheError::Gpu(gpu)).unwrap_err();
        assert!(matches!(e, lookahead::Error::NoDriver), "{e}");
    }
}
