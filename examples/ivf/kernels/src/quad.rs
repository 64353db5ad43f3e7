//! Four floats loaded at once: the scan's rows and the coarse step's centroids are read in
//! 16-byte vector loads where their layout and alignment allow.

/// Four floats, 16-byte aligned: one vector load.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Quad(pub [f32; 4]);

/// Whether `data` starts on a 16-byte boundary, so that [`load`] can read it from any
/// multiple of 4 floats.
#[inline(always)]
pub fn aligned(data: &[f32]) -> bool {
    data.as_ptr() as usize % core::mem::align_of::<Quad>() == 0
}

/// `data[at..at + 4]` in one vector load.
///
/// # Safety
/// `at + 4 <= data.len()`, `at` a multiple of 4 and `data` [`aligned`].
#[inline(always)]
pub unsafe fn load(data: &[f32], at: usize) -> [f32; 4] {
    // SAFETY: the caller's contract: in bounds and 16-byte aligned.
    unsafe { data.as_ptr().add(at).cast::<Quad>().read().0 }
}
