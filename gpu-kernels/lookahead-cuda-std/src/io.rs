//! Printing from kernels (`cuda_std::io`): [`println!`](crate::println) and
//! [`print!`](crate::print) format on the GPU (with `alloc`, through [`crate::mem`]'s
//! allocator) and hand the text to the driver's `vprintf` in one call, so lines from
//! different threads do not interleave. The driver prints the buffer when the host next
//! synchronises with the launch; its size is `CU_LIMIT_PRINTF_FIFO_SIZE` (1 MiB by default).
//! On the host they print with `std`-less `core::fmt` into nothing: kernels print only on
//! the GPU.

#[cfg(target_arch = "nvptx64")]
extern "C" {
    // The CUDA driver's printf: a format string and a pointer to the packed arguments.
    fn vprintf(format: *const u8, args: *const core::ffi::c_void) -> i32;
}

/// Formats `args` and prints them through `vprintf` (what `print!` expands to).
#[doc(hidden)]
#[inline(never)]
pub fn _print(args: core::fmt::Arguments<'_>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut text = alloc::string::String::new();
        if core::fmt::write(&mut text, args).is_err() {
            return;
        }
        text.push('\0');
        let argument: *const u8 = text.as_ptr();
        // SAFETY: "%s" reads one pointer to a NUL-terminated string, which `argument` is,
        // alive until `vprintf` returns.
        unsafe {
            vprintf(
                c"%s".as_ptr() as *const u8,
                &argument as *const *const u8 as *const core::ffi::c_void,
            )
        };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    let _ = args;
}

/// Prints to the host's standard output from a kernel (through the driver's `vprintf`).
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::io::_print(::core::format_args!($($arg)*))
    };
}

/// Prints a line to the host's standard output from a kernel (through the driver's
/// `vprintf`); one `vprintf` call per line.
#[macro_export]
macro_rules! println {
    () => {
        $crate::print!("\n")
    };
    ($fmt:literal $(, $($arg:tt)*)?) => {
        $crate::io::_print(::core::format_args!(::core::concat!($fmt, "\n") $(, $($arg)*)?))
    };
}

/// `assert_eq!` for kernels: on failure prints both values with the file and line through
/// `vprintf`, then stops the kernel with a trap (the launch fails with
/// `CUDA_ERROR_LAUNCH_FAILED` on the host).
#[macro_export]
macro_rules! assert_eq {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (left, right) => {
                if !(*left == *right) {
                    $crate::println!(
                        "assertion `left == right` failed at {}:{}\n  left: {:?}\n right: {:?}",
                        ::core::file!(),
                        ::core::line!(),
                        left,
                        right
                    );
                    $crate::misc::trap();
                }
            }
        }
    };
}

/// `assert_ne!` for kernels: as [`assert_eq!`](crate::assert_eq), for values that must differ.
#[macro_export]
macro_rules! assert_ne {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (left, right) => {
                if *left == *right {
                    $crate::println!(
                        "assertion `left != right` failed at {}:{}\n  left: {:?}\n right: {:?}",
                        ::core::file!(),
                        ::core::line!(),
                        left,
                        right
                    );
                    $crate::misc::trap();
                }
            }
        }
    };
}
