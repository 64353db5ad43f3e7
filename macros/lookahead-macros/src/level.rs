//! The prefetch levels: the one table of their names, their instructions and the order in
//! which a `level = auto` kernel's entries and candidates are listed. The device runtime's
//! `prefetch::Level` is generated from it (`#[prefetch_levels]`), and the host's tuner names a
//! kernel's entries by that type.

/// One prefetch level.
pub struct LevelInfo {
    /// Its variant of the device runtime's `prefetch::Level`.
    pub variant: &'static str,
    /// Its name in `#[prefetch_next(level = ..)]`, and the suffix of its entry (`NAME__l2`).
    pub name: &'static str,
    /// The instruction it issues.
    pub ptx: &'static str,
    /// What its documentation says after the instruction: what it covers, and what it needs.
    pub note: &'static str,
    /// The number by which kernels that take a level as a value (a const generic, a field of
    /// a parameter) compare it; 0 is no prefetch. Fixed once given: kernels and their CUDA
    /// C++ twins are compiled with these numbers.
    pub code: u8,
}

/// Every level, in the order a `level = auto` kernel lists its entries and candidates.
pub const LEVELS: [LevelInfo; 5] = [
    LevelInfo {
        variant: "L1",
        name: "l1",
        ptx: "prefetch.global.L1",
        note: "",
        code: 4,
    },
    LevelInfo {
        variant: "L2",
        name: "l2",
        ptx: "prefetch.global.L2",
        note: "",
        code: 1,
    },
    LevelInfo {
        variant: "L2EvictLast",
        name: "l2_evict_last",
        ptx: "prefetch.global.L2::evict_last",
        note: " (sm_80; plain L2 below when asked for `portable`)",
        code: 2,
    },
    LevelInfo {
        variant: "L2EvictNormal",
        name: "l2_evict_normal",
        ptx: "prefetch.global.L2::evict_normal",
        note: " (sm_80; plain L2 below when asked for `portable`)",
        code: 5,
    },
    LevelInfo {
        variant: "Bulk",
        name: "bulk",
        ptx: "cp.async.bulk.prefetch.L2.global",
        note: " of the whole range (sm_90; per-line L2 below when asked for `portable`)",
        code: 3,
    },
];

/// A level: its place in [`LEVELS`], so levels order as entries and candidates do.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Level(usize);

impl Level {
    /// `l2`, what a loop prefetches at unless it names a level.
    pub const L2: Level = Level::named_const("l2");
    /// `l2_evict_last`.
    pub const L2_EVICT_LAST: Level = Level::named_const("l2_evict_last");
    /// `l2_evict_normal`.
    pub const L2_EVICT_NORMAL: Level = Level::named_const("l2_evict_normal");
    /// `bulk`.
    pub const BULK: Level = Level::named_const("bulk");

    /// Every level, in table order.
    pub fn all() -> impl Iterator<Item = Level> {
        (0..LEVELS.len()).map(Level)
    }

    /// The level `#[prefetch_next(level = ..)]` calls `name`.
    pub fn named(name: &str) -> Option<Level> {
        Level::all().find(|l| l.name() == name)
    }

    /// The level called `name`, at compile time (a name not in the table does not compile).
    const fn named_const(name: &str) -> Level {
        let mut i = 0;
        while i < LEVELS.len() {
            if same(LEVELS[i].name.as_bytes(), name.as_bytes()) {
                return Level(i);
            }
            i += 1;
        }
        panic!("not a level of the table")
    }

    /// Its row of [`LEVELS`].
    pub fn info(self) -> &'static LevelInfo {
        &LEVELS[self.0]
    }

    /// Its name in `#[prefetch_next(level = ..)]`.
    pub fn name(self) -> &'static str {
        self.info().name
    }
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The names of every level, joined by `sep`.
pub fn names(sep: &str) -> String {
    Level::all().map(Level::name).collect::<Vec<_>>().join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Variants, names and codes each tell the levels apart, and no code is 0 (no prefetch).
    #[test]
    fn every_level_has_its_own_variant_name_and_code() {
        for (i, a) in LEVELS.iter().enumerate() {
            assert_ne!(a.code, 0, "{}", a.name);
            for b in &LEVELS[i + 1..] {
                assert_ne!(a.variant, b.variant);
                assert_ne!(a.name, b.name);
                assert_ne!(a.code, b.code, "{} and {}", a.name, b.name);
            }
            assert_eq!(Level::named(a.name), Some(Level(i)));
        }
        assert_eq!(Level::named("auto"), None);
    }
}
