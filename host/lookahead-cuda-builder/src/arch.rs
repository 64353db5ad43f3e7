//! Rust-CUDA's names for GPU architectures, and the `compute_XX` target features each one
//! sets for `#[cfg(target_feature = "compute_70")]`.

use lookahead_builder::Arch;

/// A GPU architecture, named as Rust-CUDA names them (`Compute80` is sm_80).
///
/// rustc's backend and CUDA 12's `ptxas` support sm_50 and later (sm_35 and sm_37 are
/// refused with an error); `cuda_std`'s atomics with orderings need sm_70 or later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum NvvmArch {
    /// sm_35 (not supported by CUDA 12: building for it is an error)
    Compute35,
    /// sm_37 (not supported by CUDA 12: building for it is an error)
    Compute37,
    /// sm_50
    Compute50,
    /// sm_52
    Compute52,
    /// sm_53
    Compute53,
    /// sm_60
    Compute60,
    /// sm_61 (the default, as in Rust-CUDA)
    #[default]
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
    /// sm_101
    Compute101,
    /// sm_103
    Compute103,
    /// sm_120
    Compute120,
    /// sm_121
    Compute121,
}

impl NvvmArch {
    /// Every architecture, oldest first.
    pub const ALL: [NvvmArch; 21] = {
        use NvvmArch::*;
        [
            Compute35, Compute37, Compute50, Compute52, Compute53, Compute60, Compute61, Compute62,
            Compute70, Compute72, Compute75, Compute80, Compute86, Compute87, Compute89, Compute90,
            Compute100, Compute101, Compute103, Compute120, Compute121,
        ]
    };

    /// The compute capability as major * 10 + minor (`80` for `Compute80`).
    pub fn capability(self) -> u32 {
        use NvvmArch::*;
        match self {
            Compute35 => 35,
            Compute37 => 37,
            Compute50 => 50,
            Compute52 => 52,
            Compute53 => 53,
            Compute60 => 60,
            Compute61 => 61,
            Compute62 => 62,
            Compute70 => 70,
            Compute72 => 72,
            Compute75 => 75,
            Compute80 => 80,
            Compute86 => 86,
            Compute87 => 87,
            Compute89 => 89,
            Compute90 => 90,
            Compute100 => 100,
            Compute101 => 101,
            Compute103 => 103,
            Compute120 => 120,
            Compute121 => 121,
        }
    }

    /// The `sm_XX` name.
    pub fn target_cpu(self) -> String {
        format!("sm_{}", self.capability())
    }

    /// Rust-CUDA's target feature for this architecture (`"compute_70"`).
    pub fn target_feature(self) -> String {
        format!("compute_{}", self.capability())
    }

    /// The target features code built for this architecture sees, as Rust-CUDA's codegen
    /// sets them: its own and every older architecture's (`compute_70` sets `compute_60`,
    /// `compute_61`, ... and `compute_70`, not `compute_72`).
    pub fn all_target_features(self) -> Vec<String> {
        let mut features: Vec<String> = (Self::ALL.iter())
            .filter(|a| a.capability() <= self.capability())
            .map(|a| a.target_feature())
            .collect();
        features.sort();
        features
    }
}

/// The rustc flags that make `#[cfg(target_feature = "compute_XX")]` mean for `arch` what
/// it means under Rust-CUDA, in every crate of the build: rustc's own target features for
/// nvptx are `sm_XX` and `ptxNN`, so these are set with `--cfg` (which rustc refuses for
/// `target_feature` unless `explicit_builtin_cfgs_in_flags` is allowed), and every
/// architecture's name is declared an expected value, so a misspelt one still warns
/// (`unexpected_cfgs`).
pub(crate) fn target_feature_flags(arch: Arch) -> Vec<String> {
    let mut flags = vec!["-Aexplicit_builtin_cfgs_in_flags".to_string()];
    let features: Vec<String> = (NvvmArch::ALL.iter())
        .filter(|a| a.capability() <= arch.compute_capability())
        .map(|a| a.target_feature())
        .collect();
    flags.extend((features.iter()).map(|f| format!("--cfg=target_feature=\"{f}\"")));
    let known: Vec<String> = (NvvmArch::ALL.iter())
        .map(|a| format!("\"{}\"", a.target_feature()))
        .collect();
    flags.push(format!(
        "--check-cfg=cfg(target_feature,values({}))",
        known.join(",")
    ));
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_architecture_sets_itself_and_every_older_one() {
        let features = NvvmArch::Compute70.all_target_features();
        for expected in [
            "compute_35",
            "compute_60",
            "compute_61",
            "compute_62",
            "compute_70",
        ] {
            assert!(features.iter().any(|f| f == expected), "{expected}");
        }
        assert!(!features
            .iter()
            .any(|f| f == "compute_72" || f == "compute_80"));
        assert_eq!(NvvmArch::Compute90.target_cpu(), "sm_90");
        assert_eq!(NvvmArch::default(), NvvmArch::Compute61);
    }

    #[test]
    fn flags_set_the_features_and_declare_every_name() {
        let flags = target_feature_flags(Arch::SM_80);
        assert!(flags.contains(&"--cfg=target_feature=\"compute_80\"".to_string()));
        assert!(flags.contains(&"--cfg=target_feature=\"compute_61\"".to_string()));
        assert!(!flags.contains(&"--cfg=target_feature=\"compute_86\"".to_string()));
        let check = flags.last().unwrap();
        assert!(check.contains("\"compute_121\"") && check.contains("\"compute_35\""));
    }
}
