//! # lookahead-macros
//!
//! The procedural macros of Lookahead's kernel DSL. Use them through `lookahead-device`,
//! which re-exports them: `use lookahead_device::{kernel, device_fn, shared_array};`.
//!
//! * [`macro@kernel`] turns a plain Rust function into a PTX kernel on the GPU target and
//!   into a typed launcher on the host.
//! * [`macro@device_fn`] marks a device helper whose `#[prefetch_next]` loops should be
//!   rewritten.
//! * [`macro@prefetch_next`] annotates a `for` loop inside either of them.
//! * [`shared_array!`] declares a block-wide array in shared memory.
//! * [`macro@DeviceCopy`] and [`macro@KernelParams`] make the user's own structs kernel
//!   parameters.
//!
//! Every misuse is reported as a compile error with a span on the offending item; the
//! macros never panic.

use proc_macro::TokenStream;

mod context;
mod generate;
mod ident;
mod level;
mod parse;
mod paths;
mod rewrite;

use parse::derive::{DeviceCopyStruct, KernelParamsStruct};
use parse::kernel::{DeviceFn, Kernel};
use parse::level::LevelEnum;

/// Turns `fn NAME(params) { body }` into a GPU kernel and its typed host launcher.
///
/// ```ignore
/// use lookahead_device::prelude::*;
/// use lookahead_device::kernel;
///
/// #[kernel(same_len(x, y))]
/// pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
///     let i = global_index_x();
///     if i < y.len() {
///         y[i] = a * x[i] + y[i];
///     }
/// }
/// ```
///
/// * **On `nvptx64`** it emits `#[no_mangle] pub unsafe extern "gpu-kernel" fn NAME(...)`
///   (a PTX `.entry NAME`) whose parameters are the lowered forms of the declared ones: a
///   scalar stays a scalar, a slice or view becomes a pointer and a `usize` length, from
///   which the body's typed views are rebuilt. The kernel crate enables the ABI once with
///   `#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]`.
/// * **On the host** it emits a module `NAME` with `NAME::launch(on, cfg, args...)`, where
///   `on` is a `lookahead::Gpu`, a cudarc `Arc<CudaStream>` or a `lookahead::launch::Launcher`,
///   `cfg` a `lookahead::launch::LaunchConfig` (or cudarc's), and the arguments are checked
///   by rustc against the parameters: `&[T]` takes `&` any GPU-visible allocation of `T`
///   (cudarc `CudaSlice`/`CudaView`/`UnifiedSlice`...), `&mut [T]` a `&mut` one,
///   `DeviceSlice<T>`/`DeviceSliceMut<T>` only device memory, `ManagedSlice<T>`/
///   `ManagedSliceMut<T>` only managed memory. Before launching it checks the launch
///   configuration and the declared length rules and returns `lookahead::Error::InvalidLaunch`
///   or `lookahead::Error::LengthMismatch` instead of launching. The body is also compiled
///   on the host (never called) so that a stable host compiler type-checks it.
///
/// Options: `same_len(a, b, ...)` (those slices must have equal lengths), `min_len(a = N)`
/// (slice `a` must hold at least `N` elements), `ptx = path` (the `PTX` table the launcher
/// loads; `crate::PTX` by default, as written by `lookahead-builder`).
///
/// **Kernels with `#[prefetch_next(level = auto)]` loops** are compiled once per candidate
/// level: the PTX entry `NAME` runs those loops without prefetching, `NAME__l2`,
/// `NAME__l2_evict_last`, ... prefetch at their level, and every entry takes the distance of
/// the `distance = auto` loops as its last parameter. Their host module also has
/// `CANDIDATES` (the plain entry, then each level at each distance), `ENTRIES` (each entry's
/// level and name), `Level` and `Variant` (re-exported from `lookahead::launch::autotune`),
/// `launch_variant(variant, on, cfg, args...)` (that candidate, unmeasured) and
/// `auto_choice(on) -> Option<Variant>`; `launch` picks the candidate per GPU by measurement
/// (the first launches take turns over the candidates, timed with CUDA events on the launch
/// stream, and the fastest is kept; every launch runs the caller's arguments once). On the
/// CPU emulator `launch` runs each candidate once, then the first hinted one.
///
/// Compile errors: returning a value, generic parameters, `async`, `const`, an explicit ABI
/// or `#[no_mangle]`, `self`, patterns other than plain names, parameters of any type not
/// listed above (the error names the parameter and lists the accepted kinds), and two
/// kernels with the same exported name in one crate.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match Kernel::parse(attr.into(), item.into()) {
        Ok(k) => generate::kernel::kernel(&k).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Marks a device helper function so its `#[prefetch_next]` loops are rewritten (and
/// inlines it). Helpers are compiled on both targets like kernel bodies.
///
/// ```ignore
/// #[device_fn]
/// fn sum(xs: &[f32]) -> f32 {
///     let mut acc = 0.0;
///     #[prefetch_next(distance = 8, level = l2)]
///     for x in xs.iter() { acc += *x; }
///     acc
/// }
/// ```
#[proc_macro_attribute]
pub fn device_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    match DeviceFn::parse(attr.into(), item.into()) {
        Ok(d) => generate::kernel::device_fn(&d).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// On a `for` loop inside a [`macro@kernel`] or [`macro@device_fn`] function: before
/// iteration `i`'s body, prefetch what iteration `i + distance` will use, never past the
/// loop's end or the data's end.
///
/// `#[prefetch_next(distance = N, level = auto | l1 | l2 | l2_evict_last | l2_evict_normal |
/// bulk, portable, of(a, b, ...), queue = q)]`
///
/// * `distance`: iterations ahead, a positive integer literal (default 1).
/// * `level`: `l2` by default. `l2_evict_last`/`l2_evict_normal` need sm_80, `bulk`
///   (`cp.async.bulk.prefetch.L2.global`) needs sm_90: asking for them when compiling for an
///   older architecture is a compile error naming the architecture, unless `portable` is
///   given, which falls back to plain per-line `prefetch.global.L2`.
/// * `level = auto` (the recommended default, with `distance = auto`): the enclosing
///   `#[kernel]` gets an entry where the loop does not prefetch and one per candidate level
///   where it does (those listed in `level = auto(l2, bulk, ..)`, else `l2` and
///   `l2_evict_last`, and `bulk` when an iteration reads a chunk or a range), and its
///   launcher keeps whichever measures fastest on the GPU it runs on (see [`macro@kernel`]).
///   A hint that slows a kernel down is therefore never kept.
///   Only in a `#[kernel]`'s own body (a `#[device_fn]` is not an entry of its own).
/// * Loop forms: integer ranges `a..b`, `a..=b`, `(a..b).step_by(s)` (grid-stride loops),
///   which prefetch element `i + distance * step` of every slice indexed by the loop
///   variable (found in the body, or listed with `of(...)`); `xs.iter()` / `xs.iter_mut()`,
///   which prefetch element `i + distance` of `xs`; and `xs.chunks(k)` (also `chunks_mut`,
///   `chunks_exact`, `chunks_exact_mut`), which prefetch the whole chunk `i + distance`
///   (one bulk prefetch with `level = bulk`, handling 16-byte alignment itself).
/// * `of(...)` (range loops): the targets. A slice or view (`of(x)`) gets element
///   `i + distance * step`; an expression that mentions the loop variable names the range an
///   iteration reads, and is evaluated with the loop variable set to the later iteration's
///   value, all of it prefetched: `of(lists.part(off[l] as usize..off[l + 1] as usize))`,
///   `of(src.at(idx[i] as usize))` (`part`/`at` from `lookahead_device::prefetch::PrefetchPart`
///   keep the memory kind; the expression must be valid for every iteration the loop runs).
/// * `queue = q` (a `lookahead_device::uvm::requests::RequestQueue`): for targets in managed
///   memory (`ManagedSlice`, `ManagedSliceMut`, their parts), instead of a hint the loop asks
///   the host to migrate the range iteration `i + distance` reads (`q.request(flag, ..)`,
///   none past the loop's end), asks for the first `distance` iterations before the loop,
///   and calls `q.wait_ready(flag)` for the current iteration before its body (a timeout or
///   a fallback reads through the fault path; results never change). The flag is the
///   iteration's index (the loop value for ranges, the position for `iter`/`chunks`); with
///   `n` targets, target `k` uses `index * n + k`. Targets in device memory keep their hint.
/// * Managed memory without `queue` gets `prefetch.global.L2` whatever the level: it does
///   not migrate Unified Memory pages on the H100 (only `queue` does).
///
/// **Pipelines.** `#[prefetch_next(into = shared([T; N]), stages = S, copy = K, of(name =
/// target, ..))]` on a range loop the whole block runs together (such as
/// `for t in (block_idx_x() as usize..tiles).step_by(grid_dim_x() as usize)`) stages each
/// target iteration `i` reads into shared memory before its body, `S - 1` iterations ahead,
/// with asynchronous copies (`lookahead_device::pipeline`), and binds `name` to the staged
/// copy (`&[T]`) in the body. A target is a slice (`&x[a..b]`), rows at a pitch
/// (`x.rows(first, row_len, rows, pitch)`) or gathered rows (`x.gather_rows(&idx[a..b],
/// row_len)`), evaluated for each iteration's value of the loop variable; each gets `N`
/// elements of every stage. `stages`: 2 to 8 (default 3); `copy`: `cp_async` (default,
/// sm_80), `bulk` (sm_90, 16-byte-aligned rows) or `bulk_portable`. The loop's waits are
/// block barriers: every thread of the block must run the same iterations.
///
/// Used anywhere else (outside `#[kernel]`/`#[device_fn]`), it is a compile error.
#[proc_macro_attribute]
pub fn prefetch_next(attr: TokenStream, item: TokenStream) -> TokenStream {
    generate::prefetch::misplaced(attr.into(), item.into()).into()
}

/// `shared_array!(T; N)`: a block-wide array of `N` elements of `T` in shared memory,
/// returned as a `lookahead_device::SharedArray<T, N>` handle. Each call site is one array.
///
/// ```ignore
/// let tile = shared_array!(f32; 256);
/// tile.set(thread_idx_x() as usize, 1.0);
/// sync_threads();
/// ```
#[proc_macro]
pub fn shared_array(input: TokenStream) -> TokenStream {
    match syn::parse::<parse::shared::SharedArray>(input) {
        Ok(s) => generate::shared::shared_array(&s).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[derive(DeviceCopy)]` on a `#[repr(C)]` struct of plain data (integers, floats, arrays,
/// raw pointers, other `DeviceCopy` structs) with no padding: the struct can be a kernel
/// parameter by value and the element of `&[T]`, `&mut [T]` and the views, on the GPU and on
/// the emulator, and cudarc can allocate and copy it (`DeviceRepr`, `ValidAsZeroBits`).
///
/// ```ignore
/// #[derive(Clone, Copy, DeviceCopy)]
/// #[repr(C)]
/// pub struct Node {
///     pub next: u32,
///     pub value: f32,
/// }
/// ```
///
/// Compile errors: not a struct, generic, no `#[repr(C)]`, a field that is not `DeviceCopy`
/// (the error points at the field), padding bytes (add explicit fields), not `Copy`.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(input: TokenStream) -> TokenStream {
    match DeviceCopyStruct::parse(input.into()) {
        Ok(s) => generate::derive::device_copy(&s).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[derive(KernelParams)]` on a `#[repr(C)]` struct with named fields that are views
/// (`DeviceSlice<T>`, `DeviceSliceMut<T>`, `ManagedSlice<T>`, `ManagedSliceMut<T>`) or
/// `DeviceCopy` values: a kernel takes the struct by value, grouping parameters, and its
/// launcher takes the generated `<Name>Args<'a>` (host only), whose view fields borrow
/// allocations for the launch (`&` for read-only views, `&mut` for writable ones) and whose
/// other fields are the values.
///
/// ```ignore
/// #[derive(KernelParams)]
/// #[repr(C)]
/// pub struct Lists {
///     pub vectors: ManagedSlice<f32>,
///     pub offsets: DeviceSlice<u64>,
///     pub dim: u32,
///     pub _pad: u32,
/// }
///
/// #[kernel]
/// pub fn scan(lists: Lists, out: &mut [f32]) { .. }
///
/// // host:
/// let lists = ListsArgs { vectors: &buf, offsets: &offsets, dim: 128, _pad: 0 };
/// scan::launch(&gpu, cfg, lists, &mut out)?;
/// ```
///
/// Compile errors as for [`macro@DeviceCopy`] (no padding: a view is 16 bytes, so pad a lone
/// `u32`), and a view whose element type is not `DeviceCopy`.
#[proc_macro_derive(KernelParams)]
pub fn derive_kernel_params(input: TokenStream) -> TokenStream {
    match KernelParamsStruct::parse(input.into()) {
        Ok(s) => generate::derive::kernel_params(&s).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// On an empty `enum` (the device runtime's `prefetch::Level`): one variant per prefetch
/// level, and `ALL`, `name`, `ptx`, `code` and `parse`, from the table of levels that
/// `#[prefetch_next]` reads too, so the levels are listed once.
#[doc(hidden)]
#[proc_macro_attribute]
pub fn prefetch_levels(attr: TokenStream, item: TokenStream) -> TokenStream {
    match LevelEnum::parse(attr.into(), item.into()) {
        Ok(e) => generate::level::level_enum(&e).into(),
        Err(e) => e.to_compile_error().into(),
    }
}
