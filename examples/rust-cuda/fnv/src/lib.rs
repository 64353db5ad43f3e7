//! FNV-1a (64-bit). The crate root does not say `#![no_std]`, as Rust-CUDA's own dependency
//! crates (`cust_core`, `gpu_rand`) do not: on the host it is an ordinary crate, and the
//! device build gives every crate `no_std`, as Rust-CUDA's builder does. The kernels of
//! `rust-cuda-kernels` call it.

/// The 64-bit FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        assert_eq!(super::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
