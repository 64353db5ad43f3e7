// `cp.async` copies 4, 8 or 16 bytes: another constant size does not compile.
use lookahead_device::pipeline::cp_async::copy_ca;

fn main() {
    let (src, dst) = ([0u8; 16], [0u8; 16]);
    // SAFETY: never run (the call does not compile).
    unsafe { copy_ca::<12>(dst.as_ptr() as *mut u8, src.as_ptr()) };
}
