//! Which GPU the kernel is being compiled for (`cuda_std::cfg`).
//!
//! Rust-CUDA's codegen sets `CUDA_ARCH` (`sm_80` gives `800`) while the kernel crate
//! compiles; Lookahead's builder does the same for crates built through
//! `lookahead-cuda-builder`, once per architecture, so a check on
//! [`ComputeCapability::from_cuda_arch_env`] is a compile-time constant. rustc's own way,
//! `#[cfg(target_feature = "sm_80")]`, works as well.

/// A compute capability, from `CUDA_ARCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ComputeCapability {
    /// sm_35
    Compute35,
    /// sm_37
    Compute37,
    /// sm_50
    Compute50,
    /// sm_52
    Compute52,
    /// sm_53
    Compute53,
    /// sm_60
    Compute60,
    /// sm_61
    Compute61,
    /// sm_62
    Compute62,
    /// sm_70
    Compute70,
    /// sm_72
    Compute72,
    /// sm_75
    Compute75,
    /// sm_80
    Compute80,
    /// sm_86
    Compute86,
    /// sm_87
    Compute87,
    /// sm_89
    Compute89,
    /// sm_90
    Compute90,
    /// sm_100
    Compute100,
    /// sm_120
    Compute120,
}

impl ComputeCapability {
    /// The architecture the crate is being compiled for, from the `CUDA_ARCH` variable the
    /// builder sets (`800` is sm_80).
    ///
    /// # Panics
    /// When `CUDA_ARCH` was not set at compile time (the crate was not built by a CUDA
    /// builder) or names an architecture this list does not have.
    pub const fn from_cuda_arch_env() -> Self {
        match option_env!("CUDA_ARCH") {
            Some(arch) => match Self::from_cuda_arch(arch.as_bytes()) {
                Some(cc) => cc,
                None => panic!("CUDA_ARCH names an architecture cuda_std::cfg does not know"),
            },
            None => {
                panic!("CUDA_ARCH is not set: build the kernel crate with lookahead-cuda-builder")
            }
        }
    }

    /// The capability `CUDA_ARCH` names (`b"900"` is sm_90), if known.
    pub const fn from_cuda_arch(arch: &[u8]) -> Option<Self> {
        use ComputeCapability::*;
        Some(match arch {
            b"350" => Compute35,
            b"370" => Compute37,
            b"500" => Compute50,
            b"520" => Compute52,
            b"530" => Compute53,
            b"600" => Compute60,
            b"610" => Compute61,
            b"620" => Compute62,
            b"700" => Compute70,
            b"720" => Compute72,
            b"750" => Compute75,
            b"800" => Compute80,
            b"860" => Compute86,
            b"870" => Compute87,
            b"890" => Compute89,
            b"900" => Compute90,
            b"1000" => Compute100,
            b"1200" => Compute120,
            _ => return None,
        })
    }
}
