//! What the device and driver can do, queried once from device attributes.

use cudarc::driver::sys::CUdevice_attribute as A;

use crate::error::{Capability, DriverContext, Error, Result};
use crate::gpu::Gpu;

/// How the GPU is attached to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interconnect {
    /// PCIe: no host-native atomics, so no cache-coherent link.
    Pcie,
    /// A cache-coherent chip-to-chip link (NVLink-C2C on Grace Hopper/Blackwell), inferred
    /// from `CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED`.
    C2c,
}

/// The device and driver capabilities that decide which memory APIs work and how fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Device name.
    pub name: String,
    /// Driver CUDA version as (major, minor).
    pub driver_version: (u32, u32),
    /// Compute capability, major * 10 + minor.
    pub compute_capability: u32,
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// Total device memory in bytes.
    pub total_memory: u64,
    /// `cuMemAllocManaged` works on this device.
    pub managed_memory: bool,
    /// Fault-driven migration and concurrent CPU/GPU access to managed memory; needed to
    /// prefetch to the device and for most advice.
    pub concurrent_managed_access: bool,
    /// The GPU can access pageable (`malloc`) host memory (HMM or ATS).
    pub pageable_memory_access: bool,
    /// Pageable access goes through the host's page tables (ATS, typical of C2C systems).
    pub pageable_memory_uses_host_page_tables: bool,
    /// The host can access managed memory directly without migration.
    pub direct_managed_access_from_host: bool,
    /// Host-native atomics are supported (a coherent C2C link).
    pub host_native_atomics: bool,
    /// The low-level virtual memory management API (`cuMemCreate`, `cuMemMap`) is supported.
    pub virtual_memory_management: bool,
    /// `cuMemPrefetchBatchAsync` is available (driver CUDA 12.8 or newer).
    pub batch_prefetch: bool,
    /// PCIe or C2C.
    pub interconnect: Interconnect,
}

impl Capabilities {
    /// Queries the capabilities of `gpu`'s device.
    pub fn query(gpu: &Gpu) -> Result<Self> {
        let ctx = gpu.context();
        let attr = |a: A| -> Result<i32> { ctx.attribute(a).during("cuDeviceGetAttribute") };
        let flag = |a: A| -> Result<bool> { Ok(attr(a)? != 0) };
        let driver_version = gpu.driver_version()?;
        let host_native_atomics = flag(A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)?;
        Ok(Capabilities {
            name: gpu.name().to_string(),
            driver_version,
            compute_capability: gpu.compute_capability(),
            sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            l2_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            total_memory: ctx.total_mem().during("cuDeviceTotalMem")? as u64,
            managed_memory: flag(A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)?,
            concurrent_managed_access: flag(A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)?,
            pageable_memory_access: flag(A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)?,
            pageable_memory_uses_host_page_tables: flag(
                A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
            )?,
            direct_managed_access_from_host: flag(
                A::CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
            )?,
            host_native_atomics,
            virtual_memory_management: flag(
                A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
            )?,
            batch_prefetch: driver_version >= (12, 8),
            interconnect: if host_native_atomics {
                Interconnect::C2c
            } else {
                Interconnect::Pcie
            },
        })
    }

    /// Whether the capability is present.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::ManagedMemory => self.managed_memory,
            Capability::ConcurrentManagedAccess => self.concurrent_managed_access,
            Capability::PageableMemoryAccess => self.pageable_memory_access,
            Capability::VirtualMemoryManagement => self.virtual_memory_management,
            Capability::HostNativeAtomics => self.host_native_atomics,
            Capability::BatchPrefetch => self.batch_prefetch,
        }
    }

    /// `Ok(())` when the capability is present, else [`Error::CapabilityMissing`] naming it
    /// and `needed_by`.
    pub fn require(&self, capability: Capability, needed_by: &'static str) -> Result<()> {
        if self.has(capability) {
            Ok(())
        } else {
            Err(Error::CapabilityMissing {
                capability,
                needed_by,
            })
        }
    }

    /// A short multi-line human-readable summary.
    pub fn summary(&self) -> String {
        format!(
            "{} (sm_{}, {} SMs, L2 {} MiB, {} GiB), driver CUDA {}.{}\n\
             managed={} concurrentManagedAccess={} pageableMemoryAccess(HMM)={} \
             usesHostPageTables={} directManagedAccessFromHost={} VMM={} batchPrefetch={} \
             hostNativeAtomics={} link={:?}",
            self.name,
            self.compute_capability,
            self.sm_count,
            self.l2_bytes >> 20,
            self.total_memory >> 30,
            self.driver_version.0,
            self.driver_version.1,
            self.managed_memory,
            self.concurrent_managed_access,
            self.pageable_memory_access,
            self.pageable_memory_uses_host_page_tables,
            self.direct_managed_access_from_host,
            self.virtual_memory_management,
            self.batch_prefetch,
            self.host_native_atomics,
            self.interconnect,
        )
    }
}
