//! Which mechanism moves a managed buffer's data to the GPU, and how `Auto` chooses one
//! from the access pattern and from what the probe measured on this machine.

use serde::{Deserialize, Serialize};

use crate::probe::MachineProfile;

/// How a managed buffer's pages reach the kernel that reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Policy {
    /// No hints: pages migrate on first touch through the driver's fault path.
    Faults,
    /// In-kernel `prefetch.global.L2` hints only (the seed document's "design 5"); on
    /// drivers where they do not migrate pages this behaves like [`Policy::Faults`].
    KernelHints,
    /// Prefetch the whole buffer before the kernel (RMM's prefetch adaptor).
    PrefetchAll,
    /// The host learns which ranges are needed, prefetches them with the engine, then
    /// launches.
    HostSelected,
    /// The kernel publishes the ranges it will need to a request ring; a host service
    /// prefetches them and sets per-range ready flags the kernel waits on.
    GpuRequests,
    /// No migration: preferred location host + accessed-by GPU; the kernel reads over the
    /// interconnect. Best for data read once.
    RemoteMap,
    /// Pick one of the above per launch from the pattern and the machine's measurements.
    Auto,
}

impl Policy {
    /// Every concrete policy, in the order benchmarks report them.
    pub const CONCRETE: [Policy; 6] = [
        Policy::Faults,
        Policy::KernelHints,
        Policy::PrefetchAll,
        Policy::HostSelected,
        Policy::GpuRequests,
        Policy::RemoteMap,
    ];

    /// A short name for tables and command lines.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Faults => "faults",
            Policy::KernelHints => "kernel-hints",
            Policy::PrefetchAll => "prefetch-all",
            Policy::HostSelected => "host-selected",
            Policy::GpuRequests => "gpu-requests",
            Policy::RemoteMap => "remote-map",
            Policy::Auto => "auto",
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::CONCRETE
            .iter()
            .chain([Policy::Auto].iter())
            .find(|p| p.name() == s)
            .copied()
            .ok_or_else(|| {
                format!(
                    "unknown policy `{s}`; expected one of: faults, kernel-hints, prefetch-all, host-selected, gpu-requests, remote-map, auto"
                )
            })
    }
}

/// What a launch (or a series of launches) will read from a managed buffer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AccessPattern {
    /// Size of the whole buffer.
    pub total_bytes: u64,
    /// Bytes the launch actually reads (for IVF: the probed lists).
    pub needed_bytes: u64,
    /// Distinct ranges those bytes form (for IVF: the probed lists).
    pub ranges: u64,
    /// How many times the same needed bytes will be read in total (1: once).
    pub expected_passes: f64,
}

/// The estimated cost of one policy for a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The policy.
    pub policy: Policy,
    /// Seconds spent moving or reading cold data in the first pass.
    pub first_pass_s: f64,
    /// Seconds for all passes together.
    pub total_s: f64,
}

/// Estimates every concrete policy for `pattern` on a machine measured as `m`.
///
/// The model: the first pass moves the needed bytes (or the whole buffer) at the measured
/// rate of the mechanism; later passes read resident data at device-memory speed, except
/// [`Policy::RemoteMap`], which reads over the interconnect every pass. Per-range costs
/// (one prefetch call per range) are added for the host-driven policies.
pub fn estimate(pattern: &AccessPattern, m: &MachineProfile) -> Vec<Estimate> {
    let gb = |bytes: u64| bytes as f64 / 1e9;
    let needed = gb(pattern.needed_bytes);
    let total = gb(pattern.total_bytes);
    let later = (pattern.expected_passes - 1.0).max(0.0);
    let resident_pass = needed / m.device_gbps.max(1.0);
    let per_range = pattern.ranges as f64 * m.prefetch_call_s;
    Policy::CONCRETE
        .iter()
        .map(|&policy| {
            let first = match policy {
                Policy::Faults => needed / m.fault_gbps.max(1e-3),
                Policy::KernelHints => {
                    if m.kernel_hints_migrate {
                        needed / m.fault_gbps.max(1e-3) * 0.5
                    } else {
                        needed / m.fault_gbps.max(1e-3) * 1.02
                    }
                }
                Policy::PrefetchAll => total / m.bulk_prefetch_gbps.max(1e-3),
                Policy::HostSelected => {
                    needed / m.range_prefetch_gbps.max(1e-3) + per_range + m.host_round_trip_s
                }
                Policy::GpuRequests => needed / m.range_prefetch_gbps.max(1e-3) + per_range,
                Policy::RemoteMap => needed / m.remote_gbps.max(1e-3),
                Policy::Auto => unreachable!("Auto is not a concrete policy"),
            };
            let rest = match policy {
                Policy::RemoteMap => later * needed / m.remote_gbps.max(1e-3),
                _ => later * resident_pass,
            };
            Estimate {
                policy,
                first_pass_s: first,
                total_s: first + rest,
            }
        })
        .collect()
}

/// The policy `Auto` picks: the lowest estimated total time.
pub fn choose(pattern: &AccessPattern, m: &MachineProfile) -> Policy {
    estimate(pattern, m)
        .into_iter()
        .min_by(|a, b| a.total_s.total_cmp(&b.total_s))
        .map(|e| e.policy)
        .unwrap_or(Policy::Faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H100 numbers of the project's facts file.
    fn h100() -> MachineProfile {
        MachineProfile {
            fault_gbps: 12.0,
            bulk_prefetch_gbps: 48.0,
            range_prefetch_gbps: 25.0,
            remote_gbps: 51.0,
            device_gbps: 2900.0,
            prefetch_call_s: 20e-6,
            host_round_trip_s: 50e-6,
            kernel_hints_migrate: false,
            ..MachineProfile::default()
        }
    }

    fn pattern(needed_frac: f64, passes: f64) -> AccessPattern {
        let total = 4u64 << 30;
        let needed = (total as f64 * needed_frac) as u64;
        AccessPattern {
            total_bytes: total,
            needed_bytes: needed,
            ranges: needed / (2 << 20),
            expected_passes: passes,
        }
    }

    #[test]
    fn single_pass_cold_reads_go_remote() {
        assert_eq!(choose(&pattern(0.06, 1.0), &h100()), Policy::RemoteMap);
        assert_eq!(choose(&pattern(1.0, 1.0), &h100()), Policy::RemoteMap);
    }

    #[test]
    fn reused_data_is_migrated() {
        let p = choose(&pattern(0.06, 10.0), &h100());
        assert!(
            matches!(p, Policy::GpuRequests | Policy::HostSelected),
            "{p:?}"
        );
        // Everything needed and read many times: one big prefetch is cheapest.
        assert_eq!(choose(&pattern(1.0, 10.0), &h100()), Policy::PrefetchAll);
    }

    #[test]
    fn hints_that_do_not_migrate_never_win() {
        for frac in [0.01, 0.1, 0.5, 1.0] {
            for passes in [1.0, 2.0, 100.0] {
                assert_ne!(choose(&pattern(frac, passes), &h100()), Policy::KernelHints);
            }
        }
    }

    #[test]
    fn where_faults_are_fast_they_win() {
        let fast_faults = MachineProfile {
            fault_gbps: 400.0, // a coherent link (Grace Hopper)
            ..h100()
        };
        assert_eq!(choose(&pattern(0.1, 1.0), &fast_faults), Policy::Faults);
    }

    #[test]
    fn estimates_cover_every_concrete_policy() {
        let e = estimate(&pattern(0.5, 2.0), &h100());
        assert_eq!(e.len(), Policy::CONCRETE.len());
        for x in &e {
            assert!(x.total_s >= x.first_pass_s && x.first_pass_s > 0.0, "{x:?}");
        }
    }

    #[test]
    fn names_round_trip() {
        for p in Policy::CONCRETE.iter().chain([Policy::Auto].iter()) {
            assert_eq!(p.name().parse::<Policy>().unwrap(), *p);
        }
        assert!("fast".parse::<Policy>().unwrap_err().contains("remote-map"));
    }
}
