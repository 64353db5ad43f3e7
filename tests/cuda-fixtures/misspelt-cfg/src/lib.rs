use cuda_std::kernel;

/// Stores 70.0 from sm_70 on; `compute_71` names no architecture, so it never holds and
/// rustc warns about it.
#[kernel]
pub unsafe fn misspelt(out: *mut f32) {
    let mut value = 0.0f32;
    #[cfg(target_feature = "compute_70")]
    {
        value += 70.0;
    }
    #[cfg(target_feature = "compute_71")]
    {
        value += 71.0;
    }
    core::ptr::write_volatile(out, value);
}
