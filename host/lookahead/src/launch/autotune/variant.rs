//! What an auto-tuned kernel's candidates are: an entry (the plain one, one per prefetch
//! level of its `level = auto` loops, or one per copy kind and stage count of its
//! `stages = auto` pipelines) and a distance (a parameter of the level entries).

pub use lookahead_device::prefetch::Level;

use crate::{Error, Result};

/// How a pipelined loop copies its stages into shared memory (`copy = ..` of
/// `#[prefetch_next(into = shared(..))]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyKind {
    /// `cp.async` (sm_80): every thread copies its share.
    CpAsync,
    /// `cp.async.bulk` (sm_90): one thread hands the stage to the copy engine.
    Bulk,
    /// `bulk` on sm_90, `cp_async` below.
    BulkPortable,
    /// Loads and stores through registers (also what the plain entry stages with).
    LoadStore,
}

impl CopyKind {
    /// The name `copy = ..` gives it.
    pub const fn name(self) -> &'static str {
        match self {
            CopyKind::CpAsync => "cp_async",
            CopyKind::Bulk => "bulk",
            CopyKind::BulkPortable => "bulk_portable",
            CopyKind::LoadStore => "load_store",
        }
    }

    /// Every kind, longest name first (so parsing `bulk_portable_s3` does not stop at `bulk`).
    const ALL: [CopyKind; 4] = [
        CopyKind::BulkPortable,
        CopyKind::CpAsync,
        CopyKind::Bulk,
        CopyKind::LoadStore,
    ];
}

/// The entry of a `stages = auto` (or `copy = auto`) pipeline: its loops copy with `copy`
/// through `stages` stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pipeline {
    /// How the stages are copied.
    pub copy: CopyKind,
    /// How many stages (2 to 8).
    pub stages: u8,
}

impl Pipeline {
    /// `cp_async_s3`, `bulk_portable_s4`, ...: also the suffix of its entry (`NAME__cp_async_s3`).
    pub fn name(self) -> String {
        format!("{}_s{}", self.copy.name(), self.stages)
    }

    /// The pipeline [`Pipeline::name`] wrote.
    pub fn parse(name: &str) -> Option<Pipeline> {
        CopyKind::ALL.iter().find_map(|&copy| {
            let stages = name.strip_prefix(copy.name())?.strip_prefix("_s")?;
            let stages: u8 = stages.parse().ok().filter(|s| (2..=8).contains(s))?;
            Some(Pipeline { copy, stages })
        })
    }
}

/// One candidate of an auto-tuned kernel: which entry, and how many iterations ahead its
/// `distance = auto` loops prefetch (`0` when the kernel has none: its loops prefetch as far
/// ahead as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// The entry: `None` for `NAME`, whose `level = auto` loops do not prefetch, else the
    /// level of `NAME__<level>` (`NAME__l2`, `NAME__l2_evict_last`, ...).
    pub level: Option<Level>,
    /// The distance the entry is launched with (ignored by the plain entry).
    pub distance: u32,
    /// For a kernel with `stages = auto` pipelines: the entry `NAME__<copy>_s<stages>`
    /// (`None`: the plain entry, whose pipelined loops read their targets where they are).
    pub pipeline: Option<Pipeline>,
}

impl Variant {
    /// The plain entry: no prefetch in the `level = auto` loops, no staging in the
    /// `stages = auto` ones.
    pub const PLAIN: Variant = Variant {
        level: None,
        distance: 0,
        pipeline: None,
    };

    /// `level` at `distance`.
    pub const fn new(level: Level, distance: u32) -> Variant {
        Variant {
            level: Some(level),
            distance,
            pipeline: None,
        }
    }

    /// The entry whose pipelines copy with `copy` through `stages` stages.
    pub const fn pipelined(copy: CopyKind, stages: u8) -> Variant {
        Variant {
            level: None,
            distance: 0,
            pipeline: Some(Pipeline { copy, stages }),
        }
    }

    /// Whether this is the plain entry.
    pub fn is_plain(self) -> bool {
        self.level.is_none() && self.pipeline.is_none()
    }

    /// `plain`, `l2` (distance as written), `l2_d4`, `l2_evict_last_d2`, `bulk_d8`,
    /// `cp_async_s3`, ...
    pub fn name(self) -> String {
        match (self.pipeline, self.level, self.distance) {
            (None, Some(l), d) if d > 0 => format!("{}_d{d}", l.name()),
            _ => self.entry_name(),
        }
    }

    /// The entry's own part of [`Variant::name`]: `plain`, the level, or the pipeline.
    fn entry_name(self) -> String {
        match (self.pipeline, self.level) {
            (Some(p), _) => p.name(),
            (None, l) => l.map_or("plain", Level::name).to_string(),
        }
    }

    /// Whether `self` and `other` launch the same entry (whatever their distances).
    pub fn same_entry(self, other: Variant) -> bool {
        self.level == other.level && self.pipeline == other.pipeline
    }

    /// The variant [`Variant::name`] wrote (`hinted` is read as `l2`).
    pub fn parse(name: &str) -> Option<Variant> {
        let name = name.trim();
        match name {
            "plain" => return Some(Variant::PLAIN),
            "hinted" => return Some(Variant::new(Level::L2, 0)),
            _ => {}
        }
        if let Some(p) = Pipeline::parse(name) {
            return Some(Variant::pipelined(p.copy, p.stages));
        }
        if let Some(l) = Level::parse(name) {
            return Some(Variant::new(l, 0));
        }
        let (level, d) = name.rsplit_once("_d")?;
        let distance = d.parse().ok().filter(|d| *d > 0)?;
        Level::parse(level).map(|l| Variant::new(l, distance))
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// The PTX entry of `variant` among a kernel's `entries` (one per entry, keyed by a variant
/// of it, as `#[kernel]` lists them in `ENTRIES`), or an error naming those the kernel has.
pub fn entry_for(
    kernel: &'static str,
    entries: &'static [(Variant, &'static str)],
    variant: Variant,
) -> Result<&'static str> {
    match entries.iter().find(|(v, _)| v.same_entry(variant)) {
        Some((_, entry)) => Ok(entry),
        None => Err(Error::InvalidArgument {
            call: kernel,
            reason: format!(
                "variant `{variant}` needs an entry at `{}`, which this kernel does not have \
                 (its `level = auto` and `stages = auto` loops list the entries it is compiled \
                 with): use one of {}",
                variant.entry_name(),
                (entries.iter())
                    .map(|(v, _)| v.entry_name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in [
            Variant::PLAIN,
            Variant::new(Level::L2, 0),
            Variant::new(Level::L2, 4),
            Variant::new(Level::L2EvictLast, 16),
            Variant::new(Level::Bulk, 2),
            Variant::new(Level::L2EvictNormal, 1),
            Variant::pipelined(CopyKind::CpAsync, 3),
            Variant::pipelined(CopyKind::BulkPortable, 8),
            Variant::pipelined(CopyKind::Bulk, 2),
            Variant::pipelined(CopyKind::LoadStore, 3),
        ] {
            assert_eq!(Variant::parse(&v.name()), Some(v), "{v}");
        }
        assert_eq!(
            Variant::new(Level::L2EvictLast, 2).name(),
            "l2_evict_last_d2"
        );
        assert_eq!(Variant::parse("hinted"), Some(Variant::new(Level::L2, 0)));
        for bad in [
            "",
            "l3",
            "l2_d0",
            "l2_dx",
            "plain_d4",
            "d4",
            "cp_async_s1",
            "bulk_s9",
            "cp_async",
        ] {
            assert_eq!(Variant::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_missing_entry_is_an_error_naming_those_there_are() {
        static ENTRIES: [(Variant, &str); 2] =
            [(Variant::PLAIN, "k"), (Variant::new(Level::L2, 0), "k__l2")];
        assert_eq!(
            entry_for("k", &ENTRIES, Variant::new(Level::L2, 8)).unwrap(),
            "k__l2"
        );
        let e = entry_for("k", &ENTRIES, Variant::new(Level::Bulk, 8)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("bulk_d8") && text.contains("plain, l2"),
            "{text}"
        );
    }
}
