//! Atomics (`cuda_std::atomic`): float atomic types at block, device and system scope, and
//! the scoped operations on raw pointers in [`mid`].
//!
//! As in Rust-CUDA, `core::sync::atomic` types are not the way to write GPU atomics: PTX has
//! three scopes and hardware float adds that `core` cannot express. The types here work on
//! the host too (through `core`'s atomics on the same bits), so code that uses them can be
//! tested there.

pub mod mid;

use core::cell::UnsafeCell;
use core::sync::atomic::Ordering;

macro_rules! float_atomic {
    ($($(#[$doc:meta])* $name:ident, $t:ident, $bits:literal, $host:ident, $scope:ident;)*) => {$(
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name {
            value: UnsafeCell<$t>,
        }

        // SAFETY: every access through `&self` is atomic.
        unsafe impl Sync for $name {}

        paste::paste! {
        impl $name {
            /// A new atomic holding `value`.
            pub const fn new(value: $t) -> Self {
                Self { value: UnsafeCell::new(value) }
            }

            /// The value, consuming the atomic.
            pub fn into_inner(self) -> $t {
                self.value.into_inner()
            }

            /// The value, through an exclusive borrow (no atomic access needed).
            pub fn get_mut(&mut self) -> &mut $t {
                self.value.get_mut()
            }

            /// A raw pointer to the value.
            pub const fn as_ptr(&self) -> *mut $t {
                self.value.get()
            }

            /// Loads the value.
            #[inline(always)]
            pub fn load(&self, order: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                return $t::from_bits(unsafe { mid::[<atomic_load_ $bits _ $scope>](self.as_ptr() as *const _, order) });
                #[cfg(not(target_arch = "nvptx64"))]
                $t::from_bits(self.host().load(order))
            }

            /// Stores `value`.
            #[inline(always)]
            pub fn store(&self, value: $t, order: Ordering) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                unsafe { mid::[<atomic_store_ $bits _ $scope>](self.as_ptr() as *mut _, order, value.to_bits()) };
                #[cfg(not(target_arch = "nvptx64"))]
                self.host().store(value.to_bits(), order)
            }

            /// Adds `value` (one hardware float add); returns the old value.
            #[inline(always)]
            pub fn fetch_add(&self, value: $t, order: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                return unsafe { mid::[<atomic_fetch_add_ $t _ $scope>](self.as_ptr(), order, value) };
                #[cfg(not(target_arch = "nvptx64"))]
                self.host_update(order, |old| old + value)
            }

            /// Subtracts `value`; returns the old value.
            #[inline(always)]
            pub fn fetch_sub(&self, value: $t, order: Ordering) -> $t {
                self.fetch_add(-value, order)
            }

            /// Bitwise "and" of the value's bits with `value`'s; returns the old value.
            #[inline(always)]
            pub fn fetch_and(&self, value: $t, order: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                return unsafe { mid::[<atomic_fetch_and_ $t _ $scope>](self.as_ptr(), order, value) };
                #[cfg(not(target_arch = "nvptx64"))]
                self.host_update(order, |old| $t::from_bits(old.to_bits() & value.to_bits()))
            }

            /// Bitwise "or" of the value's bits with `value`'s; returns the old value.
            #[inline(always)]
            pub fn fetch_or(&self, value: $t, order: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                return unsafe { mid::[<atomic_fetch_or_ $t _ $scope>](self.as_ptr(), order, value) };
                #[cfg(not(target_arch = "nvptx64"))]
                self.host_update(order, |old| $t::from_bits(old.to_bits() | value.to_bits()))
            }

            /// Bitwise "xor" of the value's bits with `value`'s; returns the old value.
            #[inline(always)]
            pub fn fetch_xor(&self, value: $t, order: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                return unsafe { mid::[<atomic_fetch_xor_ $t _ $scope>](self.as_ptr(), order, value) };
                #[cfg(not(target_arch = "nvptx64"))]
                self.host_update(order, |old| $t::from_bits(old.to_bits() ^ value.to_bits()))
            }

            /// Stores `value`; returns the old value.
            #[inline(always)]
            pub fn swap(&self, value: $t, order: Ordering) -> $t {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the pointer comes from `&self`.
                return unsafe { mid::[<atomic_fetch_exch_ $t _ $scope>](self.as_ptr(), order, value) };
                #[cfg(not(target_arch = "nvptx64"))]
                self.host_update(order, |_| value)
            }

            #[cfg(not(target_arch = "nvptx64"))]
            fn host(&self) -> &core::sync::atomic::$host {
                // SAFETY: same size and alignment; every access through `&self` is atomic.
                unsafe { &*(self.as_ptr() as *const core::sync::atomic::$host) }
            }

            #[cfg(not(target_arch = "nvptx64"))]
            fn host_update(&self, order: Ordering, f: impl Fn($t) -> $t) -> $t {
                let load = match order {
                    Ordering::Release | Ordering::Relaxed => Ordering::Relaxed,
                    Ordering::AcqRel => Ordering::Acquire,
                    o => o,
                };
                let old = self.host().fetch_update(order, load, |bits| Some(f($t::from_bits(bits)).to_bits()));
                $t::from_bits(old.unwrap_or_else(|bits| bits))
            }
        }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&self.load(Ordering::Relaxed), f)
            }
        }
    )*};
}

float_atomic! {
    /// An `f32` updated atomically by the threads of one device (`.gpu` scope).
    AtomicF32, f32, 32, AtomicU32, device;
    /// An `f64` updated atomically by the threads of one device (`.gpu` scope).
    AtomicF64, f64, 64, AtomicU64, device;
    /// An `f32` updated atomically by the threads of one block (`.cta` scope: cheaper, but
    /// other blocks' accesses are not ordered with it).
    BlockAtomicF32, f32, 32, AtomicU32, block;
    /// An `f64` updated atomically by the threads of one block (`.cta` scope).
    BlockAtomicF64, f64, 64, AtomicU64, block;
    /// An `f32` updated atomically by the device, other devices and the host (`.sys` scope).
    SystemAtomicF32, f32, 32, AtomicU32, system;
    /// An `f64` updated atomically by the device, other devices and the host (`.sys` scope).
    SystemAtomicF64, f64, 64, AtomicU64, system;
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn float_adds_from_many_host_threads_are_not_lost() {
        let total = AtomicF32::new(0.0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        total.fetch_add(1.0, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(total.into_inner(), 8000.0);
    }

    #[test]
    fn sub_swap_load_store() {
        let x = SystemAtomicF64::new(10.0);
        assert_eq!(x.fetch_sub(2.5, Ordering::AcqRel), 10.0);
        assert_eq!(x.swap(1.0, Ordering::SeqCst), 7.5);
        x.store(4.0, Ordering::Release);
        assert_eq!(x.load(Ordering::Acquire), 4.0);
        let bits = AtomicF32::new(f32::from_bits(0b1100));
        assert_eq!(
            bits.fetch_and(f32::from_bits(0b1010), Ordering::Relaxed)
                .to_bits(),
            0b1100
        );
        assert_eq!(
            bits.fetch_or(f32::from_bits(0b0001), Ordering::Relaxed)
                .to_bits(),
            0b1000
        );
        assert_eq!(
            bits.fetch_xor(f32::from_bits(0b1111), Ordering::Relaxed)
                .to_bits(),
            0b1001
        );
        assert_eq!(bits.load(Ordering::Relaxed).to_bits(), 0b0110);
        let mut y = BlockAtomicF32::new(1.0);
        *y.get_mut() = 2.0;
        assert_eq!(std::format!("{y:?}"), "2.0");
    }
}
