//! What a [`crate::PolicyBuffer`] sets up on its managed allocation, as plans of steps: which
//! driver calls a policy's set-up, a change of mapping, an eviction or a move to the GPU
//! makes, in which order, and what each step changes. The plans are pure, so they are tested
//! without a GPU; `PolicyBuffer` executes them one driver call per step.

use lookahead::{ByteRange, Error, Result};

use crate::policy::Policy;

/// Device memory left free beside a pull cache (for the kernels' own buffers and other
/// work): [`crate::PolicyBuffer`] allocates a cache only where it leaves this much.
pub const PULL_CACHE_HEADROOM: usize = 1 << 30;

/// What a [`crate::PolicyBuffer`] has set up on its allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Setup {
    /// The GPU has accessed-by advice on the whole allocation: it reads host-resident pages
    /// over the interconnect instead of faulting them over.
    pub mapped_for_gpu: bool,
    /// Mapping also makes the host the preferred location (so the driver never moves mapped
    /// pages to the GPU on its own).
    pub prefer_host: bool,
    /// The GPU-driven pull's device cache is allocated.
    pub pull_cache: bool,
}

/// One driver call (or stream operation) of a plan, on the whole allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Preferred location: the host.
    PreferHost,
    /// No preferred location.
    UnsetPreferredLocation,
    /// Accessed-by advice for the buffer's GPU.
    MapForGpu,
    /// No accessed-by advice for the buffer's GPU.
    UnmapForGpu,
    /// No driver call: whether later mappings also make the host the preferred location.
    PreferHostWhenMapped(bool),
    /// Allocate the pull's device cache (refused where it would leave less than
    /// [`PULL_CACHE_HEADROOM`] free).
    AllocatePullCache,
    /// Migrate every page to the host, on the buffer's stream.
    MigrateToHost,
    /// Migrate every page to the buffer's GPU, on the buffer's stream.
    MigrateToGpu,
    /// Zero the pull cache's counters on the buffer's stream: nothing counts as cached.
    ClearPullCounters,
    /// Wait for the buffer's stream.
    Synchronize,
}

impl Setup {
    /// The set-up after `step`.
    pub fn after(self, step: Step) -> Setup {
        match step {
            Step::MapForGpu => Setup {
                mapped_for_gpu: true,
                ..self
            },
            Step::UnmapForGpu => Setup {
                mapped_for_gpu: false,
                ..self
            },
            Step::PreferHostWhenMapped(on) => Setup {
                prefer_host: on,
                ..self
            },
            Step::AllocatePullCache => Setup {
                pull_cache: true,
                ..self
            },
            Step::PreferHost
            | Step::UnsetPreferredLocation
            | Step::MigrateToHost
            | Step::MigrateToGpu
            | Step::ClearPullCounters
            | Step::Synchronize => self,
        }
    }

    /// The set-up after every step of `steps`, in order.
    pub fn after_all(self, steps: &[Step]) -> Setup {
        steps.iter().fold(self, |s, &step| s.after(step))
    }

    /// Maps the allocation for the GPU (the preferred location first, when the host is to be
    /// preferred) or removes the mapping (and then the preferred location); nothing when it
    /// is already so.
    pub fn map_for_gpu(self, on: bool) -> Vec<Step> {
        match (on, self.mapped_for_gpu, self.prefer_host) {
            (true, false, true) => vec![Step::PreferHost, Step::MapForGpu],
            (true, false, false) => vec![Step::MapForGpu],
            (false, true, true) => vec![Step::UnmapForGpu, Step::UnsetPreferredLocation],
            (false, true, false) => vec![Step::UnmapForGpu],
            (_, _, _) => Vec::new(),
        }
    }

    /// Changes whether mapping prefers the host; a mapped allocation is unmapped and mapped
    /// again with the new setting. Nothing when the setting is already so.
    pub fn set_prefer_host(self, on: bool) -> Vec<Step> {
        if on == self.prefer_host {
            return Vec::new();
        }
        let mut steps = self.map_for_gpu(false);
        steps.push(Step::PreferHostWhenMapped(on));
        if self.mapped_for_gpu {
            let unmapped = self.after_all(&steps);
            steps.extend(unmapped.map_for_gpu(true));
        }
        steps
    }

    /// What `policy` needs before a launch: the mapping on for the policies that read
    /// through it ([`Policy::maps_for_gpu`]) and when `pull` (the pull is to be set up), off
    /// for those that rely on faults ([`Policy::needs_faults`]), unchanged for the others;
    /// with `pull`, the pull cache.
    pub fn prepare(self, policy: Policy, pull: bool) -> Vec<Step> {
        let mut steps = if policy.maps_for_gpu() || pull {
            self.map_for_gpu(true)
        } else if policy.needs_faults() {
            self.map_for_gpu(false)
        } else {
            Vec::new()
        };
        if pull && !self.pull_cache {
            steps.push(Step::AllocatePullCache);
        }
        steps
    }

    /// Every page to the GPU, unmapped (the everything-resident baseline), waited for.
    pub fn make_resident(self) -> Vec<Step> {
        let mut steps = self.map_for_gpu(false);
        steps.extend([Step::MigrateToGpu, Step::Synchronize]);
        steps
    }

    /// A cold start: every page to the host and the pull cache emptied, waited for. The
    /// mapping stays as it is.
    pub fn evict_to_host(self) -> Vec<Step> {
        vec![
            Step::MigrateToHost,
            Step::ClearPullCounters,
            Step::Synchronize,
        ]
    }
}

/// `policy`, where a launch can run under it: [`Policy::Auto`] is a choice among the others
/// ([`crate::UvmRuntime::resolve`] makes it), so it is refused with
/// [`Error::InvalidArgument`].
pub fn launch_policy(policy: Policy) -> Result<Policy> {
    if policy == Policy::Auto {
        return Err(Error::InvalidArgument {
            call: "PolicyBuffer::stage",
            reason: "Auto is not a policy a launch runs under: resolve it first \
                     (UvmRuntime::resolve)"
                .into(),
        });
    }
    Ok(policy)
}

/// Whether a pull cache of `bytes` fits in `free` bytes of device memory with
/// [`PULL_CACHE_HEADROOM`] to spare.
pub fn pull_cache_fits(bytes: usize, free: usize) -> bool {
    bytes
        .checked_add(PULL_CACHE_HEADROOM)
        .is_some_and(|need| free >= need)
}

/// [`pull_cache_fits`], or [`Error::OutOfMemory`] saying what did not fit.
pub fn check_pull_cache_room(bytes: usize, free: usize) -> Result<()> {
    if pull_cache_fits(bytes, free) {
        return Ok(());
    }
    Err(Error::OutOfMemory {
        during: "PolicyBuffer pull cache (device memory the size of the buffer)",
        requested: bytes,
        available: free.saturating_sub(PULL_CACHE_HEADROOM),
    })
}

/// The element ranges `ranges` of an allocation of `len` elements of `elem_size` bytes at
/// `base`, as byte ranges: empty ranges are left out, one that ends before it starts or past
/// the allocation is [`Error::InvalidRange`].
pub fn byte_ranges(
    base: u64,
    len: usize,
    elem_size: usize,
    ranges: &[std::ops::Range<usize>],
) -> Result<Vec<ByteRange>> {
    ranges
        .iter()
        .filter(|r| r.end != r.start)
        .map(|r| {
            let count = r.end.checked_sub(r.start).ok_or(Error::InvalidRange {
                start: r.start as u64,
                len: 0,
                limit: len as u64,
                reason: "range end before its start",
            })?;
            lookahead::range::element_range(base, len, elem_size, r.start, count)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(mapped_for_gpu: bool, prefer_host: bool) -> Setup {
        Setup {
            mapped_for_gpu,
            prefer_host,
            pull_cache: false,
        }
    }

    /// Every set-up a buffer can be in.
    fn every_setup() -> Vec<Setup> {
        let mut all = Vec::new();
        for bits in 0..8u8 {
            all.push(Setup {
                mapped_for_gpu: bits & 1 != 0,
                prefer_host: bits & 2 != 0,
                pull_cache: bits & 4 != 0,
            });
        }
        all
    }

    #[test]
    fn mapping_sets_the_preferred_location_first_and_clears_it_last() {
        assert_eq!(setup(false, false).map_for_gpu(true), [Step::MapForGpu]);
        assert_eq!(
            setup(false, true).map_for_gpu(true),
            [Step::PreferHost, Step::MapForGpu]
        );
        assert_eq!(setup(true, false).map_for_gpu(false), [Step::UnmapForGpu]);
        assert_eq!(
            setup(true, true).map_for_gpu(false),
            [Step::UnmapForGpu, Step::UnsetPreferredLocation]
        );
    }

    #[test]
    fn mapping_what_is_mapped_does_nothing() {
        for s in every_setup() {
            let steps = s.map_for_gpu(s.mapped_for_gpu);
            assert!(steps.is_empty(), "{s:?}: {steps:?}");
            for on in [false, true] {
                let after = s.after_all(&s.map_for_gpu(on));
                assert_eq!(after.mapped_for_gpu, on, "{s:?}");
                assert_eq!(after.map_for_gpu(on), [], "{s:?} twice");
            }
        }
    }

    #[test]
    fn changing_the_host_preference_remaps_a_mapped_buffer() {
        assert_eq!(
            setup(true, false).set_prefer_host(true),
            [
                Step::UnmapForGpu,
                Step::PreferHostWhenMapped(true),
                Step::PreferHost,
                Step::MapForGpu
            ]
        );
        assert_eq!(
            setup(true, true).set_prefer_host(false),
            [
                Step::UnmapForGpu,
                Step::UnsetPreferredLocation,
                Step::PreferHostWhenMapped(false),
                Step::MapForGpu
            ]
        );
        // Unmapped: only the setting changes, for the next mapping.
        assert_eq!(
            setup(false, false).set_prefer_host(true),
            [Step::PreferHostWhenMapped(true)]
        );
        for s in every_setup() {
            assert_eq!(s.set_prefer_host(s.prefer_host), [], "{s:?}");
            let after = s.after_all(&s.set_prefer_host(!s.prefer_host));
            assert_eq!(
                after,
                Setup {
                    prefer_host: !s.prefer_host,
                    ..s
                }
            );
        }
    }

    #[test]
    fn each_policy_gets_the_mapping_it_reads_through() {
        for s in every_setup() {
            for policy in Policy::CONCRETE {
                let pull = policy == Policy::GpuPull;
                let after = s.after_all(&s.prepare(policy, pull));
                let mapped = if policy.maps_for_gpu() {
                    true
                } else if policy.needs_faults() {
                    false
                } else {
                    s.mapped_for_gpu
                };
                assert_eq!(after.mapped_for_gpu, mapped, "{s:?} {policy:?}");
                assert_eq!(after.pull_cache, s.pull_cache || pull, "{s:?} {policy:?}");
                assert_eq!(after.prefer_host, s.prefer_host);
                // Prepared once, the second time costs nothing.
                assert_eq!(after.prepare(policy, pull), [], "{s:?} {policy:?}");
            }
        }
    }

    #[test]
    fn auto_is_prepared_for_the_pull_where_it_fits() {
        let unmapped = setup(false, false);
        assert_eq!(
            unmapped.prepare(Policy::Auto, true),
            [Step::MapForGpu, Step::AllocatePullCache]
        );
        // Without room for the cache, Auto leaves the buffer as it is.
        assert_eq!(unmapped.prepare(Policy::Auto, false), []);
        assert_eq!(setup(true, true).prepare(Policy::Auto, false), []);
        // Host-selected and the other explicit migrations work under either mapping.
        for s in [setup(true, false), setup(false, false)] {
            for p in [
                Policy::PrefetchAll,
                Policy::HostSelected,
                Policy::GpuRequests,
            ] {
                assert_eq!(s.prepare(p, false), [], "{s:?} {p:?}");
            }
        }
    }

    #[test]
    fn residency_unmaps_and_eviction_keeps_the_mapping() {
        assert_eq!(
            setup(true, true).make_resident(),
            [
                Step::UnmapForGpu,
                Step::UnsetPreferredLocation,
                Step::MigrateToGpu,
                Step::Synchronize
            ]
        );
        for s in every_setup() {
            let resident = s.after_all(&s.make_resident());
            assert!(!resident.mapped_for_gpu);
            let evicted = s.after_all(&s.evict_to_host());
            assert_eq!(evicted, s, "eviction changes no set-up");
            assert_eq!(
                s.evict_to_host(),
                [
                    Step::MigrateToHost,
                    Step::ClearPullCounters,
                    Step::Synchronize
                ]
            );
        }
    }

    #[test]
    fn a_launch_runs_under_a_concrete_policy() {
        for p in Policy::CONCRETE {
            assert_eq!(launch_policy(p).unwrap(), p);
        }
        let Err(Error::InvalidArgument { reason, .. }) = launch_policy(Policy::Auto) else {
            panic!("Auto must be resolved before a launch");
        };
        assert!(reason.contains("UvmRuntime::resolve"), "{reason}");
    }

    #[test]
    fn the_pull_cache_needs_its_size_and_the_headroom() {
        let gib = 1usize << 30;
        assert!(pull_cache_fits(4 * gib, 5 * gib));
        assert!(!pull_cache_fits(4 * gib, 5 * gib - 1));
        assert!(!pull_cache_fits(usize::MAX, usize::MAX));
        assert!(check_pull_cache_room(gib, 2 * gib).is_ok());
        match check_pull_cache_room(4 * gib, 3 * gib) {
            Err(Error::OutOfMemory {
                requested,
                available,
                during,
            }) => {
                assert_eq!((requested, available), (4 * gib, 2 * gib));
                assert!(during.contains("pull cache"), "{during}");
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        let Err(Error::OutOfMemory { available, .. }) = check_pull_cache_room(gib, gib / 2) else {
            panic!("a cache larger than free memory must be refused");
        };
        assert_eq!(available, 0);
    }

    #[test]
    fn element_ranges_become_byte_ranges_within_the_allocation() {
        let base = 0x1000;
        let got = byte_ranges(base, 100, 4, &[0..10, 20..20, 90..100]).unwrap();
        assert_eq!(
            got,
            [
                ByteRange {
                    start: base,
                    len: 40
                },
                ByteRange {
                    start: base + 360,
                    len: 40
                }
            ]
        );
        assert!(byte_ranges(base, 100, 4, &[]).unwrap().is_empty());
        for bad in [90..101, 100..101] {
            assert!(
                matches!(
                    byte_ranges(base, 100, 4, std::slice::from_ref(&bad)),
                    Err(Error::InvalidRange { .. })
                ),
                "{bad:?}"
            );
        }
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = byte_ranges(base, 100, 4, &[0..4, 10..5]);
        let Err(Error::InvalidRange { reason, .. }) = backwards else {
            panic!("a backwards range must be refused: {backwards:?}");
        };
        assert!(reason.contains("before its start"), "{reason}");
    }
}
