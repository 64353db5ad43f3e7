// A bulk copy of a constant size that is not a multiple of 16 bytes does not compile.
use lookahead_device::pipeline::bulk::copy_bulk;
use lookahead_device::pipeline::MBarrier;

fn main() {
    let (src, mut dst, mut word) = ([0u8; 32], [0u8; 32], 0u64);
    // SAFETY: never run (the call does not compile).
    unsafe {
        let bar = MBarrier::from_ptr(&mut word);
        copy_bulk::<24>(dst.as_mut_ptr(), src.as_ptr(), bar);
    }
}
