//! What each GPU of a set and each ordered pair can do, and how they are linked.
//!
//! Peer access, native atomics and the driver's performance rank of a pair come from
//! `cuDeviceGetP2PAttribute`. The driver has no attribute for the kind of link, so that comes
//! from NVML (`libnvidia-ml`, installed with the driver): the NVLinks of each GPU that are
//! active and lead to the other GPU (or to the NVSwitches both reach), else the PCIe level
//! that joins them; and each GPU's PCIe link to the host. Where NVML cannot be loaded the
//! link is reported as unknown, with the reason.

use cudarc::driver::sys;
use lookahead::{DriverContext, Gpu};
use nvml_wrapper::enum_wrappers::device::TopologyLevel;
use nvml_wrapper::Nvml;

use crate::error::Result;
use crate::set::{can_access_peer, GpuSet};

/// Most NVLinks NVML numbers per GPU (`NVML_NVLINK_MAX_LINKS`).
const MAX_NVLINKS: u32 = 18;

/// One GPU of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceReport {
    /// Position in the set.
    pub position: usize,
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Device name.
    pub name: String,
    /// PCI bus id (`0000:18:00.0`).
    pub pci_bus_id: String,
    /// Total device memory, bytes.
    pub total_memory: u64,
    /// The PCIe link to the host, from NVML: generation and width now, or why unknown.
    pub host_link: std::result::Result<PcieLink, String>,
}

/// A PCIe link's generation and lane count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieLink {
    /// PCIe generation in use (5 for Gen5).
    pub generation: u32,
    /// Lanes in use (16 for x16).
    pub width: u32,
}

/// How two GPUs are linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// NVLink: the number of active links of the first GPU that reach the second, directly
    /// or through NVSwitches both GPUs have links to.
    NvLink {
        /// Active links.
        links: u32,
        /// Whether they go through NVSwitches.
        through_switch: bool,
    },
    /// No NVLink between them: PCIe, joined at this level of the PCIe tree (NVML's
    /// topology level: `same board`, `one switch`, `several switches`, `host bridge`, `NUMA
    /// node`, `across NUMA nodes`).
    Pcie {
        /// Where their paths meet.
        joined_at: &'static str,
    },
    /// NVML could not tell.
    Unknown {
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::NvLink {
                links,
                through_switch,
            } => write!(
                f,
                "NV{links} ({links} NVLinks{})",
                if *through_switch {
                    ", through NVSwitch"
                } else {
                    ""
                }
            ),
            Link::Pcie { joined_at } => write!(f, "PCIe, joined at {joined_at}"),
            Link::Unknown { reason } => write!(f, "unknown ({reason})"),
        }
    }
}

/// One ordered pair of GPUs of a set (`from` reading `to`'s memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairReport {
    /// Position of the GPU that accesses.
    pub from: usize,
    /// Position of the GPU whose memory is accessed.
    pub to: usize,
    /// `cuDeviceCanAccessPeer`.
    pub access_supported: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`.
    pub native_atomics: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK` (lower is faster, relative to other pairs).
    pub performance_rank: i32,
    /// Whether the set enabled peer access for it.
    pub peer_enabled: bool,
    /// The link.
    pub link: Link,
}

/// The report of a whole set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Each GPU, by position.
    pub devices: Vec<DeviceReport>,
    /// Each ordered pair of distinct GPUs.
    pub pairs: Vec<PairReport>,
}

impl Topology {
    /// Queries the driver (and NVML where it loads) for every GPU and pair of `set`.
    pub fn query(set: &GpuSet) -> Result<Topology> {
        let nvml = Nvml::init().map_err(|e| format!("NVML: {e}"));
        let mut devices = Vec::new();
        for (position, gpu) in set.gpus().iter().enumerate() {
            let pci_bus_id = pci_bus_id(gpu)?;
            let host_link = match &nvml {
                Ok(n) => host_link(n, &pci_bus_id),
                Err(e) => Err(e.clone()),
            };
            devices.push(DeviceReport {
                position,
                ordinal: gpu.ordinal(),
                name: gpu.name().to_string(),
                total_memory: gpu.capabilities()?.total_memory,
                pci_bus_id,
                host_link,
            });
        }
        let mut pairs = Vec::new();
        for a in 0..set.len() {
            for b in (0..set.len()).filter(|&b| b != a) {
                let (ga, gb) = (set.gpu(a), set.gpu(b));
                let attr = |at| p2p_attribute(ga, gb, at);
                use sys::CUdevice_P2PAttribute as P;
                let link = match &nvml {
                    Ok(n) => link_between(n, &devices[a].pci_bus_id, &devices[b].pci_bus_id),
                    Err(e) => Link::Unknown { reason: e.clone() },
                };
                pairs.push(PairReport {
                    from: a,
                    to: b,
                    access_supported: can_access_peer(ga, gb)?,
                    native_atomics: attr(P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)? != 0,
                    performance_rank: attr(P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
                    peer_enabled: set.peer_enabled(a, b),
                    link,
                });
            }
        }
        Ok(Topology { devices, pairs })
    }

    /// The pair `from -> to`, if both are in the set and distinct.
    pub fn pair(&self, from: usize, to: usize) -> Option<&PairReport> {
        self.pairs.iter().find(|p| p.from == from && p.to == to)
    }

    /// A few lines: each GPU with its host link, then each pair.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for d in &self.devices {
            let link = match &d.host_link {
                Ok(l) => format!("PCIe Gen{} x{}", l.generation, l.width),
                Err(e) => format!("host link unknown ({e})"),
            };
            s += &format!(
                "GPU {} (ordinal {}, {}): {}, {} GiB, host link {link}\n",
                d.position,
                d.ordinal,
                d.pci_bus_id,
                d.name,
                d.total_memory >> 30
            );
        }
        for p in &self.pairs {
            s += &format!(
                "GPU {} -> GPU {}: peer access {} (enabled: {}), native atomics {}, \
                 performance rank {}, link {}\n",
                p.from,
                p.to,
                yes_no(p.access_supported),
                yes_no(p.peer_enabled),
                yes_no(p.native_atomics),
                p.performance_rank,
                p.link
            );
        }
        s
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The device's PCI bus id as the driver writes it.
fn pci_bus_id(gpu: &Gpu) -> Result<String> {
    let mut buf = [0 as std::ffi::c_char; 32];
    // SAFETY: writes at most `buf.len()` bytes, NUL-terminated.
    unsafe {
        sys::cuDeviceGetPCIBusId(
            buf.as_mut_ptr(),
            buf.len() as i32,
            gpu.context().cu_device(),
        )
    }
    .result()
    .during("cuDeviceGetPCIBusId")?;
    // SAFETY: NUL-terminated by the driver, within `buf`.
    let id = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Ok(id.to_string_lossy().into_owned())
}

fn p2p_attribute(a: &Gpu, b: &Gpu, attr: sys::CUdevice_P2PAttribute) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int; both devices exist.
    unsafe {
        sys::cuDeviceGetP2PAttribute(
            &mut v,
            attr,
            a.context().cu_device(),
            b.context().cu_device(),
        )
    }
    .result()
    .during("cuDeviceGetP2PAttribute")?;
    Ok(v)
}

/// The same PCI address in the two spellings (the driver's 4-digit domain, NVML's 8).
fn same_pci(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let s = s.to_ascii_lowercase();
        match s.split_once(':') {
            Some((domain, rest)) => {
                format!("{:x}:{rest}", u32::from_str_radix(domain, 16).unwrap_or(0))
            }
            None => s,
        }
    };
    norm(a) == norm(b)
}

fn host_link(nvml: &Nvml, bus_id: &str) -> std::result::Result<PcieLink, String> {
    let dev = nvml
        .device_by_pci_bus_id(bus_id)
        .map_err(|e| format!("NVML: {e}"))?;
    Ok(PcieLink {
        generation: dev
            .current_pcie_link_gen()
            .map_err(|e| format!("NVML: {e}"))?,
        width: dev
            .current_pcie_link_width()
            .map_err(|e| format!("NVML: {e}"))?,
    })
}

/// The active NVLinks of the device at `bus_id`: the PCI address each leads to.
fn active_links(nvml: &Nvml, bus_id: &str) -> std::result::Result<Vec<String>, String> {
    let dev = nvml
        .device_by_pci_bus_id(bus_id)
        .map_err(|e| format!("NVML: {e}"))?;
    let mut remote = Vec::new();
    for l in 0..MAX_NVLINKS {
        let link = dev.link_wrapper_for(l);
        if link.is_active().unwrap_or(false) {
            if let Ok(pci) = link.remote_pci_info() {
                remote.push(pci.bus_id);
            }
        }
    }
    Ok(remote)
}

fn link_between(nvml: &Nvml, a: &str, b: &str) -> Link {
    let (links_a, links_b) = match (active_links(nvml, a), active_links(nvml, b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(reason), _) | (_, Err(reason)) => return Link::Unknown { reason },
    };
    let direct = links_a.iter().filter(|r| same_pci(r, b)).count() as u32;
    if direct > 0 {
        return Link::NvLink {
            links: direct,
            through_switch: false,
        };
    }
    // Links to something that is neither GPU: NVSwitches, shared when both reach them.
    let switched = links_a
        .iter()
        .filter(|r| !same_pci(r, a) && links_b.iter().any(|s| same_pci(s, r)))
        .count() as u32;
    if switched > 0 {
        return Link::NvLink {
            links: switched,
            through_switch: true,
        };
    }
    pcie_level(nvml, a, b)
}

fn pcie_level(nvml: &Nvml, a: &str, b: &str) -> Link {
    let level = nvml.device_by_pci_bus_id(a).and_then(|da| {
        let db = nvml.device_by_pci_bus_id(b)?;
        da.topology_common_ancestor(db)
    });
    match level {
        Ok(level) => Link::Pcie {
            joined_at: match level {
                TopologyLevel::Internal => "the same board",
                TopologyLevel::Single => "one PCIe switch",
                TopologyLevel::Multiple => "several PCIe switches",
                TopologyLevel::HostBridge => "a host bridge",
                TopologyLevel::Node => "one NUMA node",
                TopologyLevel::System => "across NUMA nodes",
            },
        },
        Err(e) => Link::Unknown {
            reason: format!("NVML: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_compare_across_spellings() {
        assert!(same_pci("0000:18:00.0", "00000000:18:00.0"));
        assert!(same_pci("0000:AB:00.0", "00000000:ab:00.0"));
        assert!(!same_pci("0000:18:00.0", "00000000:19:00.0"));
    }

    #[test]
    fn links_print_as_nvidia_smi_names_them() {
        let nv = Link::NvLink {
            links: 18,
            through_switch: true,
        };
        assert_eq!(nv.to_string(), "NV18 (18 NVLinks, through NVSwitch)");
        let pcie = Link::Pcie {
            joined_at: "a host bridge",
        };
        assert_eq!(pcie.to_string(), "PCIe, joined at a host bridge");
    }
}
