//! The lowered parameters of one launch, as bytes: what the launchers `#[kernel]` generates
//! build, the same for both targets. The GPU launch hands the driver a pointer to each
//! parameter (`Params::pointers`); the emulator's threads read them back (`Params::get`).

use std::ffi::c_void;

/// The lowered parameters of one launch, as bytes: each parameter at an offset aligned for
/// its type. The GPU launch passes a pointer to each; the emulator's threads read them back
/// with [`Params::get`].
#[derive(Debug, Default, Clone)]
pub struct Params {
    // 16-byte units, so every offset aligned within the buffer is aligned in memory.
    words: Vec<u128>,
    len: usize,
    spans: Vec<(usize, usize)>,
}

impl Params {
    /// Appends `value`'s bytes.
    ///
    /// # Safety
    /// `V` has no padding bytes (every [`lookahead_device::KernelParam`] type; the `#[kernel]`
    /// launchers check that each parameter's type is one, with an error naming the parameter).
    ///
    /// # Panics
    /// When the type is aligned to more than 16 bytes (no kernel parameter type is).
    pub unsafe fn push<V>(&mut self, value: &V) {
        let (size, align) = (std::mem::size_of::<V>(), std::mem::align_of::<V>());
        assert!(
            align <= 16,
            "kernel parameters are aligned to at most 16 bytes"
        );
        let at = self.len.next_multiple_of(align);
        self.len = at + size;
        self.words.resize(self.len.div_ceil(16), 0);
        // SAFETY: `V` has no padding (the caller's promise), so all `size` bytes are
        // initialised; the buffer holds `at + size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                value as *const V as *const u8,
                (self.words.as_mut_ptr() as *mut u8).add(at),
                size,
            )
        };
        self.spans.push((at, size));
    }

    /// Parameter `i` as a `V` (a copy of its bytes: each emulated thread gets its own, as each
    /// GPU thread does).
    ///
    /// # Safety
    /// Parameter `i` was pushed from a `V` (or from a value whose bytes are a valid `V`).
    ///
    /// # Panics
    /// When there is no parameter `i` or its size is not `V`'s: the launcher and the entry
    /// disagree, a bug in `#[kernel]`.
    pub unsafe fn get<V>(&self, i: usize) -> V {
        let (at, size) = self.spans[i];
        assert_eq!(
            size,
            std::mem::size_of::<V>(),
            "kernel parameter {i} has {size} bytes, read as {}",
            std::any::type_name::<V>()
        );
        // SAFETY: `size_of::<V>()` bytes pushed from a `V` (the caller's promise), at an
        // offset aligned for `V`.
        unsafe { ((self.words.as_ptr() as *const u8).add(at) as *const V).read() }
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// A pointer to each parameter, as `cuLaunchKernel` takes them.
    pub(super) fn pointers(&mut self) -> Vec<*mut c_void> {
        let base = self.words.as_mut_ptr() as *mut u8;
        // SAFETY: every span lies inside the buffer.
        (self.spans.iter())
            .map(|&(at, _)| unsafe { base.add(at) } as *mut c_void)
            .collect()
    }
}

// SAFETY: the bytes include addresses, which the emulator's threads dereference exactly as the
// GPU would; the launcher borrows the memory they point to for the whole launch.
unsafe impl Sync for Params {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_keep_each_value_aligned_and_read_back() {
        let mut p = Params::default();
        // SAFETY: padding-free values, read back as their own types.
        unsafe {
            p.push(&1u8);
            p.push(&2.5f64);
            p.push(&[7u32, 8, 9]);
            p.push(&0xdead_beef_u64);
            assert_eq!(p.get::<u8>(0), 1);
            assert_eq!(p.get::<f64>(1), 2.5);
            assert_eq!(p.get::<[u32; 3]>(2), [7, 8, 9]);
            assert_eq!(p.get::<u64>(3), 0xdead_beef);
        }
        assert_eq!(p.len(), 4);
        assert_eq!(p.spans, [(0, 1), (8, 8), (16, 12), (32, 8)]);
        let spans = p.spans.clone();
        let base = p.words.as_ptr() as usize;
        for (ptr, (at, _)) in p.pointers().iter().zip(&spans) {
            assert_eq!(*ptr as usize - base, *at);
            assert_eq!(
                *ptr as usize % 8,
                0,
                "aligned for the widest parameter here"
            );
        }
    }

    #[test]
    #[should_panic(expected = "has 4 bytes, read as u64")]
    fn reading_a_parameter_as_another_size_is_a_bug_report() {
        let mut p = Params::default();
        // SAFETY: a padding-free value; the read is refused before it happens.
        unsafe {
            p.push(&1u32);
            let _: u64 = p.get(0);
        }
    }
}
