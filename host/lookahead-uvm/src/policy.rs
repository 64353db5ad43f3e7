//! Which mechanism moves a managed buffer's data to the GPU, and how `Auto` chooses one
//! from the access pattern and from what the probe measured on this machine.

use serde::{Deserialize, Serialize};

use crate::probe::MachineProfile;

/// How a managed buffer's pages reach the kernel that reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Policy {
    /// No hints: pages migrate on first touch through the driver's fault path.
    Faults,
    /// In-kernel `prefetch.global.L2` hints only; on drivers where they do not migrate pages
    /// (the H100 with driver 580.159.04) this behaves like [`Policy::Faults`].
    KernelHints,
    /// Prefetch the whole buffer before the kernel (RMM's prefetch adaptor).
    PrefetchAll,
    /// The host learns which ranges are needed, prefetches them with the engine, then
    /// launches.
    HostSelected,
    /// The kernel publishes the ranges it will need to a request ring; a host service
    /// prefetches them and sets per-range ready flags the kernel waits on.
    GpuRequests,
    /// No migration: the buffer is mapped for the GPU (accessed-by advice), so the kernel
    /// reads host-resident pages over the interconnect. Best for data read once.
    RemoteMap,
    /// GPU-driven pull: the buffer is mapped for the GPU as for [`Policy::RemoteMap`], and
    /// the kernel itself copies the ranges it needs over the interconnect into a
    /// device-memory cache (a few warps copy, the others wait per range and read the cache),
    /// so cold data arrives at the interconnect's streaming rate with no host round trip
    /// and no page migration. What was copied stays cached for later launches. Needs device
    /// memory for the cache, and the buffer must not change while it is cached.
    GpuPull,
    /// Pick one of the above per launch from the pattern and the machine's measurements.
    Auto,
}

impl Policy {
    /// Every concrete policy, in the order benchmarks report them.
    pub const CONCRETE: [Policy; 7] = [
        Policy::Faults,
        Policy::KernelHints,
        Policy::PrefetchAll,
        Policy::HostSelected,
        Policy::GpuRequests,
        Policy::RemoteMap,
        Policy::GpuPull,
    ];

    /// Whether the policy reads the buffer through a GPU mapping of host-resident pages
    /// (accessed-by advice), rather than migrating them.
    pub fn maps_for_gpu(self) -> bool {
        matches!(self, Policy::RemoteMap | Policy::GpuPull)
    }

    /// Whether the policy relies on page faults migrating the pages, which the accessed-by
    /// advice of [`Policy::maps_for_gpu`] would turn into remote reads. The other policies
    /// migrate explicitly and work under either mapping.
    pub fn needs_faults(self) -> bool {
        matches!(self, Policy::Faults | Policy::KernelHints)
    }

    /// A short name for tables and command lines.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Faults => "faults",
            Policy::KernelHints => "kernel-hints",
            Policy::PrefetchAll => "prefetch-all",
            Policy::HostSelected => "host-selected",
            Policy::GpuRequests => "gpu-requests",
            Policy::RemoteMap => "remote-map",
            Policy::GpuPull => "gpu-pull",
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
                    "unknown policy `{s}`; expected one of: faults, kernel-hints, prefetch-all, host-selected, gpu-requests, remote-map, gpu-pull, auto"
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
    /// Contiguous ranges those bytes form (for IVF: runs of adjacent probed lists).
    pub ranges: u64,
    /// How many times the same needed bytes will be read in total (1: once).
    pub expected_passes: f64,
    /// Whether the buffer is already mapped for the GPU (accessed-by advice): then
    /// [`Policy::RemoteMap`] and [`Policy::GpuPull`] pay no advice. (Clearing the advice
    /// for the fault-driven policies is nearly free.)
    #[serde(default)]
    pub mapped_for_gpu: bool,
    /// Whether a device-memory cache for [`Policy::GpuPull`] is available; without one
    /// `Auto` never picks it.
    #[serde(default)]
    pub device_cache: bool,
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

/// The rate at which host-issued prefetches migrate ranges averaging `avg_range` bytes:
/// the probe's 2 MiB-range rate for small ranges, its single-bulk rate from 32 MiB up, and
/// in between interpolated on a log scale (large calls are what reach the interconnect).
pub fn migrate_gbps(m: &MachineProfile, avg_range: f64) -> f64 {
    let (small, large) = (2.0 * 1048576.0, 32.0 * 1048576.0);
    let lo = m.range_prefetch_gbps.max(1e-3);
    let hi = m.bulk_prefetch_gbps.max(lo);
    if avg_range <= small {
        lo
    } else if avg_range >= large {
        hi
    } else {
        let t = (avg_range / small).ln() / (large / small).ln();
        lo + (hi - lo) * t
    }
}

/// Estimates every concrete policy for `pattern` on a machine measured as `m`.
///
/// The model: the first pass moves the needed bytes (or the whole buffer) at the measured
/// rate of the mechanism; later passes read resident data at device-memory speed, except
/// [`Policy::RemoteMap`], which reads over the interconnect every pass. The two policies
/// that map the buffer for the GPU pay for the advice on the whole buffer unless it is
/// already mapped; [`Policy::GpuPull`] copies at the remote-read rate (its copy warps are
/// the remote read) into its cache, and is ruled out without one. GPU-driven requests migrate at the host prefetch rate for
/// the ranges' size (the service merges adjacent ranges into large calls), and are ruled out
/// when the probe saw a request not arrive; host-selected ranges add a host round trip and a
/// per-call cost.
pub fn estimate(pattern: &AccessPattern, m: &MachineProfile) -> Vec<Estimate> {
    let gb = |bytes: u64| bytes as f64 / 1e9;
    let needed = gb(pattern.needed_bytes);
    let total = gb(pattern.total_bytes);
    let later = (pattern.expected_passes - 1.0).max(0.0);
    let resident_pass = needed / m.device_gbps.max(1.0);
    let avg_range = pattern.needed_bytes as f64 / pattern.ranges.max(1) as f64;
    let migrate = migrate_gbps(m, avg_range);
    let per_range = pattern.ranges as f64 * m.prefetch_call_s;
    let advice = if pattern.mapped_for_gpu {
        0.0
    } else {
        total * 1e9 / (1u64 << 30) as f64 * m.remote_advice_s_per_gib
    };
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
                // The engine cuts the buffer into 32 MiB calls.
                Policy::PrefetchAll => {
                    total / m.bulk_prefetch_gbps.max(1e-3)
                        + (pattern.total_bytes as f64 / (32u64 << 20) as f64).ceil()
                            * m.prefetch_call_s
                }
                Policy::HostSelected => needed / migrate + per_range + m.host_round_trip_s,
                Policy::GpuRequests => {
                    if m.request_gbps > 0.0 {
                        needed / migrate
                    } else {
                        f64::INFINITY
                    }
                }
                Policy::RemoteMap => advice + needed / m.remote_gbps.max(1e-3),
                Policy::GpuPull => {
                    if pattern.device_cache {
                        advice + needed / m.remote_gbps.max(1e-3)
                    } else {
                        f64::INFINITY
                    }
                }
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

    /// Round numbers for an H100 on PCIe (one probe's measurements are in
    /// `results/ivf_bench.md`): remote reads beat bulk prefetches, which beat 2 MiB-range
    /// prefetches and faults, and in-kernel hints migrate nothing. The tests depend on that
    /// order, not on the values.
    fn h100() -> MachineProfile {
        MachineProfile {
            fault_gbps: 12.0,
            bulk_prefetch_gbps: 45.0,
            range_prefetch_gbps: 25.0,
            remote_gbps: 51.0,
            device_gbps: 2900.0,
            prefetch_call_s: 20e-6,
            host_round_trip_s: 50e-6,
            kernel_hints_migrate: false,
            request_gbps: 30.0,
            remote_advice_s_per_gib: 0.04,
            ..MachineProfile::default()
        }
    }

    fn pattern(needed_frac: f64, passes: f64) -> AccessPattern {
        // 2048 lists of 2 MiB, a random `needed_frac` of them: runs of adjacent lists.
        let total = 4u64 << 30;
        let needed = (total as f64 * needed_frac) as u64;
        let runs = 2048.0 * needed_frac * (1.0 - needed_frac);
        AccessPattern {
            total_bytes: total,
            needed_bytes: needed,
            ranges: runs.max(1.0) as u64,
            expected_passes: passes,
            mapped_for_gpu: false,
            device_cache: false,
        }
    }

    /// `pattern` for a buffer already mapped for the GPU, with a pull cache.
    fn pull_ready(needed_frac: f64, passes: f64) -> AccessPattern {
        AccessPattern {
            mapped_for_gpu: true,
            device_cache: true,
            ..pattern(needed_frac, passes)
        }
    }

    #[test]
    fn pull_wins_on_a_mapped_buffer_with_a_cache() {
        // Remote reads (51 GB/s) beat every migration rate, and the cache makes later
        // passes resident. (Read once, remote mapping costs the same and needs no cache.)
        for frac in [0.01, 0.06, 0.25, 1.0] {
            let once = choose(&pull_ready(frac, 1.0), &h100());
            assert!(once.maps_for_gpu(), "{frac} {once:?}");
            for passes in [2.0, 10.0] {
                assert_eq!(
                    choose(&pull_ready(frac, passes), &h100()),
                    Policy::GpuPull,
                    "{frac} {passes}"
                );
            }
        }
    }

    #[test]
    fn pull_needs_a_cache_and_pays_for_unmapped_buffers() {
        let no_cache = AccessPattern {
            device_cache: false,
            ..pull_ready(0.25, 2.0)
        };
        assert_ne!(choose(&no_cache, &h100()), Policy::GpuPull);
        // Mapping 4 GiB (0.16 s) costs more than migrating 6% of it.
        let unmapped = AccessPattern {
            mapped_for_gpu: false,
            ..pull_ready(0.06, 2.0)
        };
        assert_eq!(choose(&unmapped, &h100()), Policy::GpuRequests);
        let e = estimate(&unmapped, &h100());
        let pull = e.iter().find(|x| x.policy == Policy::GpuPull).unwrap();
        let mapped = estimate(&pull_ready(0.06, 2.0), &h100());
        let pull_mapped = mapped.iter().find(|x| x.policy == Policy::GpuPull).unwrap();
        let advice = 4.0 * 0.04;
        assert!((pull.first_pass_s - pull_mapped.first_pass_s - advice).abs() < 1e-9);
    }

    #[test]
    fn only_the_mapping_policies_map() {
        for p in Policy::CONCRETE {
            assert_eq!(
                p.maps_for_gpu(),
                matches!(p, Policy::RemoteMap | Policy::GpuPull)
            );
            assert!(!(p.maps_for_gpu() && p.needs_faults()), "{p:?}");
        }
    }

    #[test]
    fn requests_win_when_data_is_read_again() {
        for frac in [0.01, 0.06, 0.25, 1.0] {
            assert_eq!(
                choose(&pattern(frac, 2.0), &h100()),
                Policy::GpuRequests,
                "{frac}"
            );
        }
    }

    #[test]
    fn remote_reads_need_cheap_advice_and_a_single_pass() {
        // The advice on the whole 4 GiB buffer costs more than moving a few percent of it.
        assert_eq!(choose(&pattern(0.06, 1.0), &h100()), Policy::GpuRequests);
        let free_advice = MachineProfile {
            remote_advice_s_per_gib: 0.0,
            ..h100()
        };
        assert_eq!(choose(&pattern(0.06, 1.0), &free_advice), Policy::RemoteMap);
        assert_ne!(choose(&pattern(0.06, 3.0), &free_advice), Policy::RemoteMap);
    }

    #[test]
    fn a_request_path_that_failed_the_probe_is_never_chosen() {
        let broken = MachineProfile {
            request_gbps: 0.0,
            ..h100()
        };
        for frac in [0.01, 0.25, 1.0] {
            let p = choose(&pattern(frac, 2.0), &broken);
            assert_ne!(p, Policy::GpuRequests);
            assert!(
                matches!(p, Policy::HostSelected | Policy::PrefetchAll),
                "{p:?}"
            );
        }
    }

    #[test]
    fn large_ranges_migrate_at_the_bulk_rate() {
        let m = h100();
        assert_eq!(migrate_gbps(&m, 1e6), 25.0);
        assert_eq!(migrate_gbps(&m, 64e6), 45.0);
        let mid = migrate_gbps(&m, 8.0 * 1048576.0);
        assert!(mid > 25.0 && mid < 45.0, "{mid}");
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
