//! GPU architectures the builder can target.

use std::fmt;
use std::str::FromStr;

use crate::BuildError;

/// A CUDA compute capability the builder compiles PTX for, such as `sm_90`.
///
/// ```
/// use lookahead_builder::Arch;
/// let arch: Arch = "sm_90".parse().unwrap();
/// assert_eq!(arch.compute_capability(), 90);
/// assert_eq!(arch.to_string(), "sm_90");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch(u32);

impl Arch {
    /// Volta (V100).
    pub const SM_70: Arch = Arch(70);
    /// Ampere (A100): first with `prefetch.global.L2::evict_last` and `applypriority`.
    pub const SM_80: Arch = Arch(80);
    /// Hopper (H100, H200): first with `cp.async.bulk.prefetch.L2.global`.
    pub const SM_90: Arch = Arch(90);

    /// Architectures built when nothing else is asked for.
    pub const DEFAULT: [Arch; 2] = [Arch::SM_80, Arch::SM_90];

    /// Compute capability as major * 10 + minor (`90` for `sm_90`).
    pub fn compute_capability(self) -> u32 {
        self.0
    }

    /// The `-C target-cpu` / `llc --mcpu` name.
    pub fn target_cpu(self) -> String {
        format!("sm_{}", self.0)
    }

    /// Parses a comma- or space-separated list such as `"sm_80,sm_90"`.
    pub fn parse_list(list: &str) -> Result<Vec<Arch>, BuildError> {
        let mut archs: Vec<Arch> = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        archs.sort();
        archs.dedup();
        if archs.is_empty() {
            return Err(BuildError::BadArch {
                given: list.to_string(),
            });
        }
        Ok(archs)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.0)
    }
}

impl FromStr for Arch {
    type Err = BuildError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s
            .trim()
            .trim_start_matches("sm_")
            .trim_start_matches("compute_");
        match digits.parse::<u32>() {
            // Rust's nvptx64 target knows sm_20 ... sm_121; older than sm_50 is not
            // supported by any CUDA 12+ ptxas, so refuse it here with a clear message.
            Ok(cc) if (50..=121).contains(&cc) => Ok(Arch(cc)),
            _ => Err(BuildError::BadArch {
                given: s.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_sorted_and_deduplicated() {
        let archs = Arch::parse_list("sm_90, sm_80 90").unwrap();
        assert_eq!(archs, vec![Arch::SM_80, Arch::SM_90]);
    }

    #[test]
    fn rejects_nonsense() {
        assert!("sm_9x".parse::<Arch>().is_err());
        assert!("sm_35".parse::<Arch>().is_err());
        assert!(Arch::parse_list(" , ").is_err());
    }
}
