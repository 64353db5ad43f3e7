//! Memory advice for managed ranges (`cuMemAdvise_v2` with a `CUmemLocation`, the CUDA 13
//! form) and reading range attributes back (`cuMemRangeGetAttribute`).
//!
//! # What can and cannot be read back
//! The driver reports, per range: whether *all* its pages are read-mostly, the preferred
//! location if *all* pages share it, the devices that have accessed-by set, and the
//! location of the last explicit prefetch if *all* pages were last prefetched there. It
//! does **not** report where pages currently reside: CUDA has no per-page residency query.
//! "Last prefetch location" says where a prefetch sent the pages, not that they are still
//! there (faults, eviction and CPU touches move pages without changing it). To learn
//! residency, measure (time an access) or keep your own book-keeping.

use cudarc::driver::sys;

use crate::error::{check, Capability, Result};
use crate::gpu::Gpu;
use crate::managed::{Location, ManagedBuffer};
use crate::prefetch::require_managed;
use crate::range::ByteRange;

/// One piece of advice about a managed range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Pages are mostly read: processors may keep read-only copies
    /// (`CU_MEM_ADVISE_SET_READ_MOSTLY`).
    SetReadMostly,
    /// Undo [`Advice::SetReadMostly`].
    UnsetReadMostly,
    /// Prefer to keep the pages at this location (`CU_MEM_ADVISE_SET_PREFERRED_LOCATION`).
    SetPreferredLocation(Location),
    /// Undo [`Advice::SetPreferredLocation`].
    UnsetPreferredLocation,
    /// Keep the pages mapped for this processor wherever they live, so it reads them
    /// without faulting (over PCIe/C2C if they are elsewhere) (`CU_MEM_ADVISE_SET_ACCESSED_BY`).
    SetAccessedBy(Location),
    /// Undo [`Advice::SetAccessedBy`] for this processor.
    UnsetAccessedBy(Location),
}

impl Advice {
    fn to_cu(self) -> (sys::CUmem_advise, sys::CUmemLocation) {
        use sys::CUmem_advise as A;
        // The location argument is ignored by the driver for read-mostly and for unsetting
        // the preferred location; any valid value will do.
        let none = Location::Host.to_cu();
        match self {
            Advice::SetReadMostly => (A::CU_MEM_ADVISE_SET_READ_MOSTLY, none),
            Advice::UnsetReadMostly => (A::CU_MEM_ADVISE_UNSET_READ_MOSTLY, none),
            Advice::SetPreferredLocation(l) => (A::CU_MEM_ADVISE_SET_PREFERRED_LOCATION, l.to_cu()),
            Advice::UnsetPreferredLocation => (A::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, none),
            Advice::SetAccessedBy(l) => (A::CU_MEM_ADVISE_SET_ACCESSED_BY, l.to_cu()),
            Advice::UnsetAccessedBy(l) => (A::CU_MEM_ADVISE_UNSET_ACCESSED_BY, l.to_cu()),
        }
    }

    fn device(self) -> Option<usize> {
        match self {
            Advice::SetPreferredLocation(Location::Device(d))
            | Advice::SetAccessedBy(Location::Device(d))
            | Advice::UnsetAccessedBy(Location::Device(d)) => Some(d),
            _ => None,
        }
    }
}

/// Applies `advice` to a managed byte range.
pub fn advise(gpu: &Gpu, range: ByteRange, advice: Advice) -> Result<()> {
    ByteRange::new(range.start, range.len)?;
    if advice.device().is_some() {
        gpu.require(
            Capability::ConcurrentManagedAccess,
            "memory advice naming a device",
        )?;
    }
    require_managed(gpu, range)?;
    let (a, loc) = advice.to_cu();
    // SAFETY: a driver call on a checked managed range; the driver validates the rest.
    check("cuMemAdvise_v2", unsafe {
        sys::cuMemAdvise_v2(range.start, range.len as usize, a, loc)
    })
}

/// The advice and prefetch state of a managed range, as the driver reports it. See the
/// module documentation for what these do not tell you (current residency).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeAttributes {
    /// All pages in the range have read-mostly set.
    pub read_mostly: bool,
    /// The preferred location, if all pages share one.
    pub preferred_location: Option<Location>,
    /// Processors with accessed-by set for the range.
    pub accessed_by: Vec<Location>,
    /// Where the last explicit prefetch sent all pages of the range, if all share one.
    pub last_prefetch_location: Option<Location>,
}

fn attribute_i32(range: ByteRange, attr: sys::CUmem_range_attribute) -> Result<i32> {
    let mut v: i32 = 0;
    // SAFETY: the four attributes read through here are documented as one 32-bit int.
    check("cuMemRangeGetAttribute", unsafe {
        sys::cuMemRangeGetAttribute(
            (&mut v as *mut i32).cast(),
            4,
            attr,
            range.start,
            range.len as usize,
        )
    })?;
    Ok(v)
}

/// Reads the advice and last-prefetch attributes of a managed byte range.
pub fn range_attributes(gpu: &Gpu, range: ByteRange) -> Result<RangeAttributes> {
    use sys::CUmem_range_attribute as R;
    ByteRange::new(range.start, range.len)?;
    require_managed(gpu, range)?;
    let read_mostly = attribute_i32(range, R::CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY)? != 0;
    let preferred_location = Location::from_device_id(attribute_i32(
        range,
        R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
    )?);
    let last_prefetch_location = Location::from_device_id(attribute_i32(
        range,
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
    )?);
    // Accessed-by: an array of device ids, padded with CU_DEVICE_INVALID (-2). One slot per
    // device plus one for the CPU.
    let slots = Gpu::count()? + 1;
    let mut ids = vec![-2i32; slots];
    // SAFETY: `ids` holds `slots` ints, `4 * slots` bytes, as passed.
    check("cuMemRangeGetAttribute", unsafe {
        sys::cuMemRangeGetAttribute(
            ids.as_mut_ptr().cast(),
            4 * slots,
            R::CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
            range.start,
            range.len as usize,
        )
    })?;
    let accessed_by = ids
        .into_iter()
        .filter_map(Location::from_device_id)
        .collect();
    Ok(RangeAttributes {
        read_mostly,
        preferred_location,
        accessed_by,
        last_prefetch_location,
    })
}

impl<T> ManagedBuffer<T> {
    /// Applies `advice` to the whole buffer.
    pub fn advise(&self, advice: Advice) -> Result<()> {
        advise(self.gpu(), self.byte_range(), advice)
    }

    /// Applies `advice` to elements `range`.
    pub fn advise_elements(&self, range: std::ops::Range<usize>, advice: Advice) -> Result<()> {
        advise(self.gpu(), self.elements(range)?, advice)
    }

    /// The attributes of the whole buffer.
    pub fn attributes(&self) -> Result<RangeAttributes> {
        range_attributes(self.gpu(), self.byte_range())
    }

    /// The attributes of elements `range`.
    pub fn attributes_of(&self, range: std::ops::Range<usize>) -> Result<RangeAttributes> {
        range_attributes(self.gpu(), self.elements(range)?)
    }
}
