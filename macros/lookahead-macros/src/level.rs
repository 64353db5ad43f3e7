//! The prefetch levels: the table of their names and the order in which a `level = auto`
//! kernel's entries and candidates are listed.

/// One prefetch level.
pub struct LevelInfo {
    /// Its variant of the device runtime's `prefetch::Level`.
    pub variant: &'static str,
    /// Its name in `#[prefetch_next(level = ..)]`, and the suffix of its entry (`NAME__l2`).
    pub name: &'static str,
}

/// Every level, in the order a `level = auto` kernel lists its entries and candidates.
pub const LEVELS: [LevelInfo; 5] = [
    LevelInfo {
        variant: "L1",
        name: "l1",
    },
    LevelInfo {
        variant: "L2",
        name: "l2",
    },
    LevelInfo {
        variant: "L2EvictLast",
        name: "l2_evict_last",
    },
    LevelInfo {
        variant: "L2EvictNormal",
        name: "l2_evict_normal",
    },
    LevelInfo {
        variant: "Bulk",
        name: "bulk",
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
