//! Per-block shared memory (`shared_array!`) and its race detector.
//!
//! Each `shared_array!` call site is one allocation per block, made the first time a thread
//! of the block reaches it. Each element has a shadow word pair recording the last writer and
//! the readers of the current barrier epoch; two different threads touching an element in
//! one epoch, at least one of them writing, is a data race (the program needs a
//! `sync_threads` between them).

use std::alloc::{alloc, dealloc, Layout};

/// A race found by [`SharedMemory::access`], raised as the kernel thread's unwind payload
/// and turned into [`crate::EmuError::DataRace`] by the scheduler.
#[derive(Debug, Clone)]
pub(crate) struct RaceReport {
    pub site: &'static str,
    pub index: usize,
    pub kind: &'static str,
    /// Linear index of the other thread (`None`: several threads read it).
    pub other: Option<u32>,
}

#[derive(Clone, Copy, Default)]
struct Shadow {
    writer: u32, // linear thread + 1; 0 = none
    write_epoch: u64,
    reader: u32, // linear thread + 1; 0 = none; SEVERAL = more than one
    read_epoch: u64,
}

const SEVERAL: u32 = u32::MAX;

struct Allocation {
    symbol: &'static str,
    site: &'static str,
    ptr: *mut u8,
    layout: Layout,
    shadow: Vec<Shadow>,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: allocated in `SharedMemory::get` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[derive(Default)]
pub(crate) struct SharedMemory {
    allocations: Vec<Allocation>,
}

impl SharedMemory {
    /// The block's array for the `shared_array!` call site `symbol` (allocated on first use).
    pub fn get(
        &mut self,
        symbol: &'static str,
        site: &'static str,
        bytes: usize,
        align: usize,
    ) -> *mut u8 {
        if let Some(a) = self.allocations.iter().find(|a| a.symbol == symbol) {
            return a.ptr;
        }
        let layout = Layout::from_size_align(bytes.max(1), align.max(16))
            .expect("shared_array! size and alignment form a valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        assert!(
            !ptr.is_null(),
            "out of host memory for shared_array! ({bytes} bytes)"
        );
        // Uninitialised shared memory is garbage on the GPU: make reading it conspicuous.
        // SAFETY: `ptr` is valid for `layout.size()` bytes.
        unsafe { ptr.write_bytes(0xff, layout.size()) };
        self.allocations.push(Allocation {
            symbol,
            site,
            ptr,
            layout,
            shadow: Vec::new(),
        });
        ptr
    }

    /// Records that thread `me` (linear index) reads or writes element `index` of the
    /// `len`-element array at `base`, in barrier epoch `epoch`.
    pub fn access(
        &mut self,
        base: *const u8,
        len: usize,
        index: usize,
        write: bool,
        me: u32,
        epoch: u64,
    ) -> Result<(), RaceReport> {
        let Some(a) = self
            .allocations
            .iter_mut()
            .find(|a| std::ptr::eq(a.ptr, base))
        else {
            return Ok(()); // not a shared_array! allocation of this block
        };
        if a.shadow.len() < len {
            a.shadow.resize(len, Shadow::default());
        }
        let Some(s) = a.shadow.get_mut(index) else {
            return Ok(());
        };
        let me1 = me + 1;
        let race = |kind, other: u32| RaceReport {
            site: a.site,
            index,
            kind,
            other: (other != SEVERAL).then(|| other - 1),
        };
        if s.write_epoch == epoch && s.writer != 0 && s.writer != me1 {
            return Err(race(
                if write {
                    "write after write"
                } else {
                    "read after write"
                },
                s.writer,
            ));
        }
        if write {
            if s.read_epoch == epoch && s.reader != 0 && s.reader != me1 {
                return Err(race("write after read", s.reader));
            }
            s.writer = me1;
            s.write_epoch = epoch;
        } else if s.read_epoch != epoch {
            s.reader = me1;
            s.read_epoch = epoch;
        } else if s.reader != me1 {
            s.reader = SEVERAL;
        }
        Ok(())
    }
}
