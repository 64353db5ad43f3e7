//! What launches keep per CUDA context: the module of each PTX table a kernel was launched
//! from ([`module_for`]: loaded on first use, `Module::load` of `module::pick_ptx`'s choice)
//! and the L2 flush buffer of the tuner's measured launches (`super::measured`).
//!
//! Both hold their context: a cudarc module keeps an `Arc<CudaContext>`, and so does the
//! flush buffer. A store that held them for good would keep every context alive for the
//! life of the process, so the store names each context by a weak handle and releases a
//! context's entry once nothing outside the store holds the context: its strong count is then
//! the entry's own references (one per module, one for the flush buffer). The count is
//! checked whenever a module is loaded and whenever a [`crate::Gpu`] handle is dropped.
//! Releasing early is always safe (the next launch loads the module again); the count only
//! decides when. The autotuner's unread timing events hold their context too, until the
//! tuner reads them (`super::autotune`).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use cudarc::driver::CudaContext;

use super::measured::FlushBuffer;
use crate::error::{DriverContext, Result};
use crate::module::Module;

/// One context's modules and flush buffer.
struct Loaded {
    ctx: Weak<CudaContext>,
    /// By the address of their PTX table.
    modules: Vec<(usize, Module)>,
    flush: Option<FlushBuffer>,
}

impl Loaded {
    fn is_of(&self, ctx: &Arc<CudaContext>) -> bool {
        std::ptr::eq(self.ctx.as_ptr(), Arc::as_ptr(ctx))
    }

    /// Whether nothing but this entry holds its context (or nothing at all).
    fn only_holder(&self) -> bool {
        let held = self.modules.len() + usize::from(self.flush.is_some());
        self.ctx.strong_count() <= held
    }
}

static LOADED: Mutex<Vec<Loaded>> = Mutex::new(Vec::new());

fn lock() -> MutexGuard<'static, Vec<Loaded>> {
    LOADED.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ctx`'s entry, made empty if there is none.
fn entry<'s>(loaded: &'s mut Vec<Loaded>, ctx: &Arc<CudaContext>) -> &'s mut Loaded {
    match loaded.iter().position(|l| l.is_of(ctx)) {
        Some(i) => &mut loaded[i],
        None => {
            loaded.push(Loaded {
                ctx: Arc::downgrade(ctx),
                modules: Vec::new(),
                flush: None,
            });
            loaded.last_mut().expect("just pushed")
        }
    }
}

/// The module of `ptx` best suited to `ctx`'s device, loaded once per (context, PTX table)
/// and kept while anything else holds the context.
pub fn module_for(ctx: &Arc<CudaContext>, ptx: &'static [(u32, &'static str)]) -> Result<Module> {
    let key = ptx.as_ptr() as usize;
    // Declared before the lock, so dropped after it on every path (see `release_unused`).
    let _released;
    let mut loaded = lock();
    let cached = (loaded.iter().find(|l| l.is_of(ctx)))
        .and_then(|l| l.modules.iter().find(|(p, _)| *p == key));
    if let Some((_, m)) = cached {
        return Ok(m.clone());
    }
    // A load is rare: the moment to release what the store alone keeps.
    _released = take_unused(&mut loaded);
    let (major, minor) = ctx.compute_capability().during("cuDeviceGetAttribute")?;
    let cc = (major * 10 + minor) as u32;
    let (arch, text) = crate::module::pick_ptx(ptx, cc)?;
    let module = Module::load(ctx, arch, text)?;
    entry(&mut loaded, ctx).modules.push((key, module.clone()));
    Ok(module)
}

/// Runs `f` on `ctx`'s flush buffer, made by `make` on first use.
pub(super) fn with_flush_buffer<R>(
    ctx: &Arc<CudaContext>,
    make: impl FnOnce(&Arc<CudaContext>) -> Result<FlushBuffer>,
    f: impl FnOnce(&FlushBuffer) -> Result<R>,
) -> Result<R> {
    let mut loaded = lock();
    let flush = &mut entry(&mut loaded, ctx).flush;
    let buffer = match flush {
        Some(b) => b,
        None => flush.insert(make(ctx)?),
    };
    f(buffer)
}

/// Releases the entries of the contexts that nothing outside this store holds.
pub(crate) fn release_unused() {
    let released = take_unused(&mut lock());
    // Dropped once the lock is released: unloading a module, freeing the flush buffer and
    // releasing the context are driver calls that may wait for the device, and launches on
    // other threads must not wait for them.
    drop(released);
}

fn take_unused(loaded: &mut Vec<Loaded>) -> Vec<Loaded> {
    let mut released = Vec::new();
    let mut i = 0;
    while i < loaded.len() {
        if loaded[i].only_holder() {
            released.push(loaded.swap_remove(i));
        } else {
            i += 1;
        }
    }
    released
}

/// Part of a [`crate::Gpu`] handle, declared after its context and stream so that it is
/// dropped after them: a dropped handle may have been the last holder of its context apart
/// from this store, which [`release_unused`] then releases.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_unused();
    }
}
