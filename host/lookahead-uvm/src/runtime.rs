//! [`UvmRuntime`]: what the policies share across buffers and launches.

use std::sync::Arc;
use std::time::Duration;

use lookahead::prefetch::PrefetchPool;
use lookahead::{Error, Gpu, PrefetchEngine, PrefetchOptions, Result};

use crate::policy::{self, AccessPattern, Policy};
use crate::probe::MachineProfile;
use crate::ring::{RequestRing, RingQueue};
use crate::service::{PrefetchService, ServiceConfig, ServiceReport};

/// The long-lived part of the policies, shared by every [`crate::PolicyBuffer`] of a GPU and
/// every launch: the request ring and the service that serves it ([`Policy::GpuRequests`]),
/// the host prefetch engine ([`Policy::HostSelected`], [`Policy::PrefetchAll`]), both issuing
/// from one [`PrefetchPool`], and the machine profile `Auto` decides from.
pub struct UvmRuntime {
    ring: Arc<RequestRing>,
    service: Option<PrefetchService>,
    pub(crate) engine: PrefetchEngine,
    /// The probe's measurements (for `Auto`).
    pub profile: MachineProfile,
    /// How long a kernel waits for a requested range (or a pulled one being copied) before
    /// it reads through the fault path or the mapping.
    pub wait: Duration,
}

impl std::fmt::Debug for UvmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UvmRuntime")
            .field("ring", &self.ring)
            .field("service", &self.service)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl UvmRuntime {
    /// A ring of `flags` ready flags (kernels request ranges `0..flags`) and at least 64
    /// slots, its service started, the engine with default options, and `profile`.
    pub fn new(
        gpu: &Gpu,
        flags: usize,
        profile: MachineProfile,
        service: ServiceConfig,
    ) -> Result<Self> {
        Self::with_engine(gpu, flags, profile, service, PrefetchOptions::default())
    }

    /// [`UvmRuntime::new`] with the host prefetch engine's options given. The service and the
    /// engine share one pool of `max(service.threads, engine.threads)` threads.
    pub fn with_engine(
        gpu: &Gpu,
        flags: usize,
        profile: MachineProfile,
        service: ServiceConfig,
        engine: PrefetchOptions,
    ) -> Result<Self> {
        let flags = u32::try_from(flags).map_err(|_| Error::InvalidArgument {
            call: "UvmRuntime::new",
            reason: format!(
                "{flags} ready flags; a request ring holds at most {}",
                u32::MAX
            ),
        })?;
        let ring = Arc::new(RequestRing::new(gpu, flags.max(64), flags)?);
        let threads = service.threads.max(engine.threads);
        let pool = Arc::new(PrefetchPool::new(gpu, threads)?);
        let service = Some(PrefetchService::start_with_pool(
            ring.clone(),
            pool.clone(),
            service,
        )?);
        let engine = PrefetchEngine::with_pool(pool, engine)?;
        Ok(UvmRuntime {
            ring,
            service,
            engine,
            profile,
            wait: Duration::from_secs(2),
        })
    }

    /// The request ring.
    pub fn ring(&self) -> &Arc<RequestRing> {
        &self.ring
    }

    /// The host prefetch engine.
    pub fn engine(&self) -> &PrefetchEngine {
        &self.engine
    }

    /// `policy`, or for [`Policy::Auto`] the policy [`policy::choose`] picks for `pattern`
    /// (asked for only then) on this machine.
    pub fn resolve(&self, policy: Policy, pattern: impl FnOnce() -> AccessPattern) -> Policy {
        match policy {
            Policy::Auto => policy::choose(&pattern(), &self.profile),
            p => p,
        }
    }

    /// The queue a launch under `policy` passes where its kernels take a
    /// [`lookahead_device::uvm::RequestQueue`]: under [`Policy::GpuRequests`] the ring's, a
    /// new generation waiting up to [`UvmRuntime::wait`]; otherwise
    /// [`RingQueue::disabled`], which asks for nothing and never waits.
    pub fn queue_for(&self, policy: Policy) -> RingQueue<'_> {
        match policy {
            Policy::GpuRequests => self.ring.queue(self.wait),
            _ => RingQueue::disabled(),
        }
    }

    /// [`UvmRuntime::wait`] in microseconds, saturated to `u32` (a kernel parameter).
    pub fn wait_us(&self) -> u32 {
        self.wait.as_micros().min(u32::MAX as u128) as u32
    }

    /// Stops the service (requests still in the ring are served first) and says what it
    /// did; `None` once stopped. Kernels then ask in vain: their waits time out.
    pub fn stop_service(&mut self) -> Option<ServiceReport> {
        self.service.take().map(PrefetchService::stop)
    }
}
