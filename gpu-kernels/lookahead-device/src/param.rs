//! What a kernel parameter can be.
//!
//! A `#[kernel]` takes scalars, slices (`&[T]`, `&mut [T]`, [`crate::view`] types) and values
//! of the user's own types:
//!
//! * [`DeviceCopy`] types are plain data whose bytes mean the same on the host and the GPU: the
//!   scalars, arrays of them, raw pointers, and `#[repr(C)]` structs of these with
//!   `#[derive(DeviceCopy)]`. They can be passed by value and be the elements of slices and
//!   views (`&[Node]`, `DeviceSlice<Node>`), on the GPU and on the emulator.
//! * `#[derive(KernelParams)]` structs group a kernel's parameters: their fields are views
//!   (read-only or writable) and `DeviceCopy` values. A kernel takes one by value, and its
//!   host launcher takes the generated `<Name>Args`, whose view fields borrow the
//!   allocations for the launch.
//!
//! ```ignore
//! #[derive(Clone, Copy, DeviceCopy)]
//! #[repr(C)]
//! pub struct Node { pub next: u32, pub value: f32 }
//!
//! #[kernel(same_len(starts, sums))]
//! pub fn chase(nodes: &[Node], starts: &[u32], steps: u32, sums: &mut [f32]) { .. }
//! ```
//!
//! Both derives refuse layouts the two sides might see differently: a struct without
//! `#[repr(C)]`, and padding bytes (which hold no defined value to copy: add explicit
//! fields such as `_pad: u32`).

/// Plain data that a kernel can take by value or as the element of a slice: its bytes are
/// copied to the GPU as they are, and read back as they are.
///
/// Implemented for the integer and float types, arrays of `DeviceCopy` types, raw pointers,
/// and by `#[derive(DeviceCopy)]` for `#[repr(C)]` structs whose fields are all `DeviceCopy` and
/// leave no padding. (`bool` and `char` are not: not every byte value is one of them.)
///
/// # Safety
/// The type must be `Copy` (plain data, no drop glue), every bit pattern the GPU can write
/// into a value of it must be a valid value on the host and on the GPU, it must have no
/// padding bytes, and its layout must be the same when compiled for the host and for
/// `nvptx64` (`#[repr(C)]` or a primitive). The derive checks all four.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be copied to the GPU: it is not `DeviceCopy`",
    label = "not `DeviceCopy`",
    note = "DeviceCopy types: integers, floats, arrays of them, raw pointers, and `#[repr(C)]` \
            structs with `#[derive(Clone, Copy, DeviceCopy)]`; views (`DeviceSlice<T>`...) go in \
            `#[derive(KernelParams)]` structs"
)]
pub unsafe trait DeviceCopy: 'static {}

/// A type a `#[kernel]` can take by value: every [`DeviceCopy`] type and every
/// `#[derive(KernelParams)]` struct. The derives implement it; so does this crate for the
/// scalars and arrays.
///
/// # Safety
/// As for [`DeviceCopy`], except that the type need not be `Copy` (a struct of writable
/// views is not) and its values need not be valid for every bit pattern: they are only ever
/// built by their own code and copied as a whole.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a kernel parameter type",
    note = "a kernel takes scalars, slices (`&[T]`, `&mut [T]`, `DeviceSlice<T>`...), \
            `#[derive(DeviceCopy)]` structs and `#[derive(KernelParams)]` structs"
)]
pub unsafe trait KernelParam: 'static {}

macro_rules! primitives {
    ($($t:ty),*) => {$(
        // SAFETY: every bit pattern is a valid value; no padding; same layout everywhere.
        unsafe impl DeviceCopy for $t {}
        // SAFETY: as above.
        unsafe impl KernelParam for $t {}
    )*};
}
primitives!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

// SAFETY: an array of `DeviceCopy` elements has their properties, and no padding between them.
unsafe impl<T: DeviceCopy + Copy, const N: usize> DeviceCopy for [T; N] {}
// SAFETY: as above.
unsafe impl<T: DeviceCopy + Copy, const N: usize> KernelParam for [T; N] {}

// SAFETY: a thin pointer is an address: any bits are a valid pointer value (dereferencing it
// is `unsafe`, and the caller's to justify).
unsafe impl<T: 'static> DeviceCopy for *const T {}
// SAFETY: as above.
unsafe impl<T: 'static> DeviceCopy for *mut T {}

/// Checks the derives expand to; not part of the API.
#[doc(hidden)]
pub mod check {
    /// A `#[derive(DeviceCopy)]` struct must also be `Copy`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` must be `Copy` to be `DeviceCopy`",
        label = "add `#[derive(Clone, Copy)]` to this struct",
        note = "DeviceCopy values are copied to the GPU byte for byte, which only `Copy` types \
                allow"
    )]
    pub trait MustBeCopy {}
    impl<T: Copy> MustBeCopy for T {}

    /// Compiles when `T` is `DeviceCopy` (the derives call it once per field).
    pub const fn device_copy<T: super::DeviceCopy>() {}

    /// Compiles when `T` is `Copy`.
    pub const fn copy<T: MustBeCopy>() {}

    /// Compiles when `T` can be a by-value kernel parameter.
    pub const fn kernel_param<T: super::KernelParam>() {}
}
