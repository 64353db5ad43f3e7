//! Which memory a generic pointer points into (`cuda_std::ptr`): `isspacep` and `cvta`.

/// A PTX state space a generic address can point into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressSpace {
    /// Device memory (`.global`).
    Global,
    /// The block's shared memory (`.shared`).
    Shared,
    /// The constant bank (`.const`).
    Constant,
    /// The thread's local memory (`.local`).
    Local,
}

/// Whether the generic pointer `ptr` points into `space` (`isspacep`).
#[inline(always)]
pub fn is_in_address_space<T>(ptr: *const T, space: AddressSpace) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        macro_rules! isspacep {
            ($s:literal) => {
                // SAFETY: tests an address without reading it.
                unsafe {
                    core::arch::asm!(
                        concat!("{{ .reg .pred p; isspacep.", $s, " p, {a}; selp.u32 {r}, 1, 0, p; }}"),
                        a = in(reg64) ptr, r = out(reg32) r, options(nostack, nomem, pure))
                }
            };
        }
        match space {
            AddressSpace::Global => isspacep!("global"),
            AddressSpace::Shared => isspacep!("shared"),
            AddressSpace::Constant => isspacep!("const"),
            AddressSpace::Local => isspacep!("local"),
        }
        r != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = ptr;
        space == AddressSpace::Global
    }
}

/// The address of `ptr` within `space` (`cvta.to.<space>`), as PTX's space-specific loads
/// and stores take it.
///
/// # Safety
/// `ptr` points into `space` ([`is_in_address_space`]); otherwise the result is meaningless.
#[inline(always)]
pub unsafe fn convert_generic_to_specific_address_space<T>(
    ptr: *const T,
    space: AddressSpace,
) -> *const T {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: *const T;
        macro_rules! cvta {
            ($s:literal) => {
                core::arch::asm!(concat!("cvta.to.", $s, ".u64 {r}, {a};"), a = in(reg64) ptr, r = out(reg64) r, options(nostack, nomem, pure))
            };
        }
        match space {
            AddressSpace::Global => cvta!("global"),
            AddressSpace::Shared => cvta!("shared"),
            AddressSpace::Constant => cvta!("const"),
            AddressSpace::Local => cvta!("local"),
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = space;
        ptr
    }
}

/// The generic address of a `space`-specific address (`cvta.<space>`), the inverse of
/// [`convert_generic_to_specific_address_space`].
///
/// # Safety
/// `ptr` is an address within `space`.
#[inline(always)]
pub unsafe fn convert_specific_address_space_to_generic<T>(
    ptr: *const T,
    space: AddressSpace,
) -> *const T {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: *const T;
        macro_rules! cvta {
            ($s:literal) => {
                core::arch::asm!(concat!("cvta.", $s, ".u64 {r}, {a};"), a = in(reg64) ptr, r = out(reg64) r, options(nostack, nomem, pure))
            };
        }
        match space {
            AddressSpace::Global => cvta!("global"),
            AddressSpace::Shared => cvta!("shared"),
            AddressSpace::Constant => cvta!("const"),
            AddressSpace::Local => cvta!("local"),
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = space;
        ptr
    }
}
