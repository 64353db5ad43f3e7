//! Atomic operations on raw pointers at a chosen scope (`cuda_std::atomic::mid`):
//! `atomic_fetch_{op}_{type}_{scope}(ptr, ordering, value)`, `atomic_load_{32|64}_{scope}`,
//! `atomic_store_{32|64}_{scope}`, `atomic_compare_and_swap_{type}_{scope}` and the fences.
//!
//! Each is one PTX `atom` / `ld` / `st` with the ordering's semantics (`.relaxed`,
//! `.acquire`, `.release`, `.acq_rel`; `SeqCst` puts a `fence.sc` of the same scope first)
//! at `.cta` (`block`), `.gpu` (`device`) or `.sys` (`system`) scope, so sm_70 or later.
//! They can only run on the GPU; on the host they panic, as Rust-CUDA's do.

use core::sync::atomic::Ordering;

/// One inline-PTX instruction for each ordering: `$head` is the instruction before its
/// `.sem`, `$tail` after it (scope, operation, type and operands).
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_macros))]
macro_rules! ordered_asm {
    ($ordering:expr, $scope:literal, $head:literal, [$($tail:literal),*], $($operands:tt)*) => {
        match $ordering {
            Ordering::Relaxed => core::arch::asm!(concat!($head, ".relaxed", $($tail),*), $($operands)*),
            Ordering::Acquire => core::arch::asm!(concat!($head, ".acquire", $($tail),*), $($operands)*),
            Ordering::Release => core::arch::asm!(concat!($head, ".release", $($tail),*), $($operands)*),
            Ordering::AcqRel => core::arch::asm!(concat!($head, ".acq_rel", $($tail),*), $($operands)*),
            _ => core::arch::asm!(concat!("fence.sc", $scope, ";\n\t", $head, ".acq_rel", $($tail),*), $($operands)*),
        }
    };
}

/// `atomic_fetch_{op}_{type}_{scope}` for the three scopes.
macro_rules! fetch_ops {
    ($($op:ident, $ptx_op:literal, $t:ident, $ptx_type:literal, $reg:ident;)*) => {$(
        fetch_op!($op, $ptx_op, $t, $ptx_type, $reg, block, ".cta");
        fetch_op!($op, $ptx_op, $t, $ptx_type, $reg, device, ".gpu");
        fetch_op!($op, $ptx_op, $t, $ptx_type, $reg, system, ".sys");
    )*};
}

macro_rules! fetch_op {
    ($op:ident, $ptx_op:literal, $t:ident, $ptx_type:literal, $reg:ident, $scope:ident, $ptx_scope:literal) => {
        paste::paste! {
            #[doc = concat!("`atom", $ptx_scope, ".", $ptx_op, ".", $ptx_type, "`: `*ptr = ", stringify!($op), "(*ptr, val)` at ", stringify!($scope), " scope; returns the old value.")]
            ///
            /// # Safety
            /// `ptr` is valid for reads and writes, aligned, and in global or shared memory;
            /// other accesses to it are atomic.
            #[inline(always)]
            pub unsafe fn [<atomic_fetch_ $op _ $t _ $scope>](ptr: *mut $t, ordering: Ordering, val: $t) -> $t {
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $t;
                    ordered_asm!(ordering, $ptx_scope, "atom",
                        [$ptx_scope, ".", $ptx_op, ".", $ptx_type, " {o}, [{p}], {v};"],
                        o = out($reg) old, p = in(reg64) ptr, v = in($reg) val, options(nostack));
                    old
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = (ptr, ordering, val);
                    unimplemented!("cuda_std::atomic::mid functions can only be used on the GPU")
                }
            }
        }
    };
}

fetch_ops! {
    add, "add", u32, "u32", reg32;
    add, "add", i32, "s32", reg32;
    add, "add", u64, "u64", reg64;
    add, "add", i64, "u64", reg64;
    add, "add", f32, "f32", reg32;
    add, "add", f64, "f64", reg64;
    and, "and", u32, "b32", reg32;
    and, "and", i32, "b32", reg32;
    and, "and", u64, "b64", reg64;
    and, "and", i64, "b64", reg64;
    and, "and", f32, "b32", reg32;
    and, "and", f64, "b64", reg64;
    or, "or", u32, "b32", reg32;
    or, "or", i32, "b32", reg32;
    or, "or", u64, "b64", reg64;
    or, "or", i64, "b64", reg64;
    or, "or", f32, "b32", reg32;
    or, "or", f64, "b64", reg64;
    xor, "xor", u32, "b32", reg32;
    xor, "xor", i32, "b32", reg32;
    xor, "xor", u64, "b64", reg64;
    xor, "xor", i64, "b64", reg64;
    xor, "xor", f32, "b32", reg32;
    xor, "xor", f64, "b64", reg64;
    min, "min", u32, "u32", reg32;
    min, "min", i32, "s32", reg32;
    min, "min", u64, "u64", reg64;
    min, "min", i64, "s64", reg64;
    max, "max", u32, "u32", reg32;
    max, "max", i32, "s32", reg32;
    max, "max", u64, "u64", reg64;
    max, "max", i64, "s64", reg64;
    exch, "exch", u32, "b32", reg32;
    exch, "exch", i32, "b32", reg32;
    exch, "exch", u64, "b64", reg64;
    exch, "exch", i64, "b64", reg64;
    exch, "exch", f32, "b32", reg32;
    exch, "exch", f64, "b64", reg64;
}

/// `atomic_fetch_sub_*`: PTX has no `atom.sub`, so it is `atom.add` of the negation.
macro_rules! fetch_sub {
    ($($t:ident, $neg:expr;)*) => {$(
        fetch_sub!(@one $t, $neg, block);
        fetch_sub!(@one $t, $neg, device);
        fetch_sub!(@one $t, $neg, system);
    )*};
    (@one $t:ident, $neg:expr, $scope:ident) => {
        paste::paste! {
            #[doc = concat!("`*ptr -= val` at ", stringify!($scope), " scope (an `atom.add` of `-val`); returns the old value.")]
            ///
            /// # Safety
            /// As for the `atomic_fetch_add_*` of the same type and scope.
            #[inline(always)]
            pub unsafe fn [<atomic_fetch_sub_ $t _ $scope>](ptr: *mut $t, ordering: Ordering, val: $t) -> $t {
                let negate: fn($t) -> $t = $neg;
                [<atomic_fetch_add_ $t _ $scope>](ptr, ordering, negate(val))
            }
        }
    };
}

fetch_sub! {
    u32, |v: u32| v.wrapping_neg();
    i32, |v: i32| v.wrapping_neg();
    u64, |v: u64| v.wrapping_neg();
    i64, |v: i64| v.wrapping_neg();
    f32, |v: f32| -v;
    f64, |v: f64| -v;
}

/// Loads, stores and compare-and-swap for one width at the three scopes.
macro_rules! load_store_cas {
    ($($bits:literal, $t:ident, $reg:ident, $ptx_type:literal;)*) => {$(
        load_store_cas!(@one $bits, $t, $reg, $ptx_type, block, ".cta");
        load_store_cas!(@one $bits, $t, $reg, $ptx_type, device, ".gpu");
        load_store_cas!(@one $bits, $t, $reg, $ptx_type, system, ".sys");
    )*};
    (@one $bits:literal, $t:ident, $reg:ident, $ptx_type:literal, $scope:ident, $ptx_scope:literal) => {
        paste::paste! {
            #[doc = concat!("`ld", $ptx_scope, ".", $ptx_type, "` with `.relaxed` or `.acquire` semantics (`Release`/`AcqRel` load as `Acquire`, `SeqCst` adds `fence.sc`).")]
            ///
            /// # Safety
            /// `ptr` is valid for reads, aligned, and in global or shared memory.
            #[inline(always)]
            pub unsafe fn [<atomic_load_ $bits _ $scope>](ptr: *const $t, ordering: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                {
                    let v: $t;
                    let ordering = match ordering { Ordering::Release | Ordering::AcqRel => Ordering::Acquire, o => o };
                    match ordering {
                        Ordering::Relaxed => core::arch::asm!(concat!("ld.relaxed", $ptx_scope, ".", $ptx_type, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) ptr, options(nostack)),
                        Ordering::Acquire => core::arch::asm!(concat!("ld.acquire", $ptx_scope, ".", $ptx_type, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) ptr, options(nostack)),
                        _ => core::arch::asm!(concat!("fence.sc", $ptx_scope, ";\n\tld.acquire", $ptx_scope, ".", $ptx_type, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) ptr, options(nostack)),
                    }
                    v
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = (ptr, ordering);
                    unimplemented!("cuda_std::atomic::mid functions can only be used on the GPU")
                }
            }

            #[doc = concat!("`st", $ptx_scope, ".", $ptx_type, "` with `.relaxed` or `.release` semantics (`Acquire`/`AcqRel` store as `Release`, `SeqCst` adds `fence.sc`).")]
            ///
            /// # Safety
            /// `ptr` is valid for writes, aligned, and in global or shared memory.
            #[inline(always)]
            pub unsafe fn [<atomic_store_ $bits _ $scope>](ptr: *mut $t, ordering: Ordering, val: $t) {
                #[cfg(target_arch = "nvptx64")]
                {
                    let ordering = match ordering { Ordering::Acquire | Ordering::AcqRel => Ordering::Release, o => o };
                    match ordering {
                        Ordering::Relaxed => core::arch::asm!(concat!("st.relaxed", $ptx_scope, ".", $ptx_type, " [{p}], {v};"), v = in($reg) val, p = in(reg64) ptr, options(nostack)),
                        Ordering::Release => core::arch::asm!(concat!("st.release", $ptx_scope, ".", $ptx_type, " [{p}], {v};"), v = in($reg) val, p = in(reg64) ptr, options(nostack)),
                        _ => core::arch::asm!(concat!("fence.sc", $ptx_scope, ";\n\tst.release", $ptx_scope, ".", $ptx_type, " [{p}], {v};"), v = in($reg) val, p = in(reg64) ptr, options(nostack)),
                    }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = (ptr, ordering, val);
                    unimplemented!("cuda_std::atomic::mid functions can only be used on the GPU")
                }
            }

            #[doc = concat!("`atom", $ptx_scope, ".cas.", $ptx_type, "`: if `*ptr == current`, `*ptr = new`; returns the old value either way.")]
            ///
            /// # Safety
            /// `ptr` is valid for reads and writes, aligned, and in global or shared memory;
            /// other accesses to it are atomic.
            #[inline(always)]
            pub unsafe fn [<atomic_compare_and_swap_ $t _ $scope>](ptr: *mut $t, current: $t, new: $t, ordering: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $t;
                    ordered_asm!(ordering, $ptx_scope, "atom",
                        [$ptx_scope, ".cas.", $ptx_type, " {o}, [{p}], {c}, {n};"],
                        o = out($reg) old, p = in(reg64) ptr, c = in($reg) current, n = in($reg) new, options(nostack));
                    old
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = (ptr, current, new, ordering);
                    unimplemented!("cuda_std::atomic::mid functions can only be used on the GPU")
                }
            }
        }
    };
}

load_store_cas! {
    32, u32, reg32, "b32";
    64, u64, reg64, "b64";
}

macro_rules! fence {
    ($($(#[$doc:meta])* $name:ident, $ptx_scope:literal;)*) => {$(
        $(#[$doc])*
        /// `Relaxed` is no fence; `SeqCst` is `fence.sc`, the others `fence.acq_rel`.
        #[inline(always)]
        pub fn $name(ordering: Ordering) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: a fence only orders this thread's memory accesses.
            unsafe {
                match ordering {
                    Ordering::Relaxed => {}
                    Ordering::SeqCst => core::arch::asm!(concat!("fence.sc", $ptx_scope, ";"), options(nostack)),
                    _ => core::arch::asm!(concat!("fence.acq_rel", $ptx_scope, ";"), options(nostack)),
                }
            }
            #[cfg(not(target_arch = "nvptx64"))]
            if ordering != Ordering::Relaxed {
                core::sync::atomic::fence(ordering);
            }
        }
    )*};
}

fence! {
    /// A memory fence among the threads of the block (`.cta`).
    block_thread_fence, ".cta";
    /// A memory fence among the threads of the device (`.gpu`).
    device_thread_fence, ".gpu";
    /// A memory fence with the host and other devices (`.sys`).
    system_thread_fence, ".sys";
}
