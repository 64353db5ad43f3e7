//! What a `level = auto` kernel's candidates are: a prefetch level (one PTX entry each) and
//! a distance (a parameter of those entries).

use crate::{Error, Result};

/// The prefetch level of a candidate: which PTX entry of the kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hint {
    /// The entry `NAME`: the `level = auto` loops do not prefetch.
    None,
    /// `NAME__l1`: `prefetch.global.L1`.
    L1,
    /// `NAME__l2`: `prefetch.global.L2`.
    L2,
    /// `NAME__l2_evict_last`: `prefetch.global.L2::evict_last`.
    L2EvictLast,
    /// `NAME__l2_evict_normal`: `prefetch.global.L2::evict_normal`.
    L2EvictNormal,
    /// `NAME__bulk`: `cp.async.bulk.prefetch.L2` over each iteration's range.
    Bulk,
}

impl Hint {
    /// Every hint, in the order candidates are listed.
    pub const ALL: [Hint; 6] = [
        Hint::None,
        Hint::L1,
        Hint::L2,
        Hint::L2EvictLast,
        Hint::L2EvictNormal,
        Hint::Bulk,
    ];

    /// `plain`, or the level as `#[prefetch_next(level = ..)]` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Hint::None => "plain",
            Hint::L1 => "l1",
            Hint::L2 => "l2",
            Hint::L2EvictLast => "l2_evict_last",
            Hint::L2EvictNormal => "l2_evict_normal",
            Hint::Bulk => "bulk",
        }
    }

    /// The hint named `name` (as [`Hint::name`] writes it).
    pub fn parse(name: &str) -> Option<Hint> {
        Hint::ALL.into_iter().find(|h| h.name() == name)
    }
}

/// One candidate of a `level = auto` kernel: which entry, and how many iterations ahead its
/// `distance = auto` loops prefetch (`0` when the kernel has none: its loops prefetch as far
/// ahead as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// The entry.
    pub hint: Hint,
    /// The distance the entry is launched with (ignored by the plain entry).
    pub distance: u32,
}

impl Variant {
    /// The plain entry: no prefetch in the `level = auto` loops.
    pub const PLAIN: Variant = Variant {
        hint: Hint::None,
        distance: 0,
    };

    /// `hint` at `distance`.
    pub const fn new(hint: Hint, distance: u32) -> Variant {
        Variant { hint, distance }
    }

    /// Whether this is the plain entry.
    pub fn is_plain(self) -> bool {
        self.hint == Hint::None
    }

    /// `plain`, `l2` (distance as written), `l2_d4`, `l2_evict_last_d2`, `bulk_d8`, ...
    pub fn name(self) -> String {
        match (self.hint, self.distance) {
            (Hint::None, _) => "plain".to_string(),
            (h, 0) => h.name().to_string(),
            (h, d) => format!("{}_d{d}", h.name()),
        }
    }

    /// The variant [`Variant::name`] wrote (`hinted` is read as `l2`).
    pub fn parse(name: &str) -> Option<Variant> {
        let name = name.trim();
        if name == "hinted" {
            return Some(Variant::new(Hint::L2, 0));
        }
        if let Some(h) = Hint::parse(name) {
            return Some(Variant::new(h, 0));
        }
        let (level, d) = name.rsplit_once("_d")?;
        let distance = d.parse().ok().filter(|d| *d > 0)?;
        Hint::parse(level)
            .filter(|h| *h != Hint::None)
            .map(|h| Variant::new(h, distance))
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// The PTX entry of `variant` among a kernel's `entries` (one per hint, as `#[kernel]`
/// lists them), or an error naming those the kernel has.
pub fn entry_for(
    kernel: &'static str,
    entries: &'static [(Hint, &'static str)],
    variant: Variant,
) -> Result<&'static str> {
    match entries.iter().find(|(h, _)| *h == variant.hint) {
        Some((_, entry)) => Ok(entry),
        None => {
            Err(Error::InvalidArgument {
                call: kernel,
                reason: format!(
                "variant `{variant}` needs an entry at `{}`, which this kernel does not have (its \
                 `level = auto` loops list the levels it is compiled at): use one of {}",
                variant.hint.name(),
                entries.iter().map(|(h, _)| h.name()).collect::<Vec<_>>().join(", ")
            ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in [
            Variant::PLAIN,
            Variant::new(Hint::L2, 0),
            Variant::new(Hint::L2, 4),
            Variant::new(Hint::L2EvictLast, 16),
            Variant::new(Hint::Bulk, 2),
            Variant::new(Hint::L2EvictNormal, 1),
        ] {
            assert_eq!(Variant::parse(&v.name()), Some(v), "{v}");
        }
        assert_eq!(
            Variant::new(Hint::L2EvictLast, 2).name(),
            "l2_evict_last_d2"
        );
        assert_eq!(Variant::parse("hinted"), Some(Variant::new(Hint::L2, 0)));
        for bad in ["", "l3", "l2_d0", "l2_dx", "plain_d4", "d4"] {
            assert_eq!(Variant::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_missing_entry_is_an_error_naming_those_there_are() {
        static ENTRIES: [(Hint, &str); 2] = [(Hint::None, "k"), (Hint::L2, "k__l2")];
        assert_eq!(
            entry_for("k", &ENTRIES, Variant::new(Hint::L2, 8)).unwrap(),
            "k__l2"
        );
        let e = entry_for("k", &ENTRIES, Variant::new(Hint::Bulk, 8)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("bulk_d8") && text.contains("plain, l2"),
            "{text}"
        );
    }
}
