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
                        concat!(
                            "{{ .reg .pred p; isspacep.",
                            $s,
                            " p, {a}; selp.u32 {r}, 1, 0, p; }}"
                        ),
                        a = in(reg64) ptr,
                        r = out(reg32) r,
                        options(nostack, nomem, pure)
                    )
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

/// One `cvta` conversion of `$ptr` for each space: `$op` is `"cvta.to."` (generic to
/// specific) or `"cvta."` (specific to generic).
#[cfg(target_arch = "nvptx64")]
macro_rules! cvta {
    ($op:literal, $ptr:expr, $space:expr) => {{
        let a = $ptr;
        // Overwritten by the instruction; starts as `a` only to have its type.
        let mut r = a;
        match $space {
            AddressSpace::Global => cvta_in!($op, "global", a, r),
            AddressSpace::Shared => cvta_in!($op, "shared", a, r),
            AddressSpace::Constant => cvta_in!($op, "const", a, r),
            AddressSpace::Local => cvta_in!($op, "local", a, r),
        }
        r
    }};
}

/// One `cvta` instruction of [`cvta`]: `$r` = `$a` converted by `$op` for the space `$s`.
#[cfg(target_arch = "nvptx64")]
macro_rules! cvta_in {
    ($op:literal, $s:literal, $a:ident, $r:ident) => {
        // SAFETY: converts an address without accessing memory.
        unsafe {
            core::arch::asm!(
                concat!($op, $s, ".u64 {r}, {a};"),
                a = in(reg64) $a,
                r = out(reg64) $r,
                options(nostack, nomem, pure)
            )
        }
    };
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
    return cvta!("cvta.to.", ptr, space);
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
    return cvta!("cvta.", ptr, space);
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = space;
        ptr
    }
}
