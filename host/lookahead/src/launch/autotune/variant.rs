//! What a `level = auto` kernel's candidates are: a prefetch level (one PTX entry each, or
//! the plain entry) and a distance (a parameter of those entries).

pub use lookahead_device::prefetch::Level;

use crate::{Error, Result};

/// One candidate of a `level = auto` kernel: which entry, and how many iterations ahead its
/// `distance = auto` loops prefetch (`0` when the kernel has none: its loops prefetch as far
/// ahead as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// The entry: `None` for `NAME`, whose `level = auto` loops do not prefetch, else the
    /// level of `NAME__<level>` (`NAME__l2`, `NAME__l2_evict_last`, ...).
    pub level: Option<Level>,
    /// The distance the entry is launched with (ignored by the plain entry).
    pub distance: u32,
}

/// `plain`, or the level as `#[prefetch_next(level = ..)]` writes it.
fn level_name(level: Option<Level>) -> &'static str {
    level.map_or("plain", Level::name)
}

impl Variant {
    /// The plain entry: no prefetch in the `level = auto` loops.
    pub const PLAIN: Variant = Variant {
        level: None,
        distance: 0,
    };

    /// `level` at `distance`.
    pub const fn new(level: Level, distance: u32) -> Variant {
        Variant {
            level: Some(level),
            distance,
        }
    }

    /// Whether this is the plain entry.
    pub fn is_plain(self) -> bool {
        self.level.is_none()
    }

    /// `plain`, `l2` (distance as written), `l2_d4`, `l2_evict_last_d2`, `bulk_d8`, ...
    pub fn name(self) -> String {
        match (self.level, self.distance) {
            (None, _) => "plain".to_string(),
            (Some(l), 0) => l.name().to_string(),
            (Some(l), d) => format!("{}_d{d}", l.name()),
        }
    }

    /// The variant [`Variant::name`] wrote (`hinted` is read as `l2`).
    pub fn parse(name: &str) -> Option<Variant> {
        let name = name.trim();
        match name {
            "plain" => return Some(Variant::PLAIN),
            "hinted" => return Some(Variant::new(Level::L2, 0)),
            _ => {}
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

/// The PTX entry of `variant` among a kernel's `entries` (one per level, `None` for the plain
/// entry, as `#[kernel]` lists them), or an error naming those the kernel has.
pub fn entry_for(
    kernel: &'static str,
    entries: &'static [(Option<Level>, &'static str)],
    variant: Variant,
) -> Result<&'static str> {
    match entries.iter().find(|(l, _)| *l == variant.level) {
        Some((_, entry)) => Ok(entry),
        None => Err(Error::InvalidArgument {
            call: kernel,
            reason: format!(
                "variant `{variant}` needs an entry at `{}`, which this kernel does not have \
                 (its `level = auto` loops list the levels it is compiled at): use one of {}",
                level_name(variant.level),
                (entries.iter())
                    .map(|(l, _)| level_name(*l))
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
        ] {
            assert_eq!(Variant::parse(&v.name()), Some(v), "{v}");
        }
        assert_eq!(
            Variant::new(Level::L2EvictLast, 2).name(),
            "l2_evict_last_d2"
        );
        assert_eq!(Variant::parse("hinted"), Some(Variant::new(Level::L2, 0)));
        for bad in ["", "l3", "l2_d0", "l2_dx", "plain_d4", "d4"] {
            assert_eq!(Variant::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_missing_entry_is_an_error_naming_those_there_are() {
        static ENTRIES: [(Option<Level>, &str); 2] = [(None, "k"), (Some(Level::L2), "k__l2")];
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
