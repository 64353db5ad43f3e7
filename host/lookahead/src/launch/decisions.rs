//! Tuning decisions kept between processes: a `level = auto` kernel's choice, once measured,
//! is written to a cache file, and a later process that launches the same kernel, from the
//! same PTX, with the same launch shape, on the same device and driver, takes it from there
//! and launches no tuning samples.
//!
//! The key names the device by UUID (so a different GPU in the same slot tunes again), the
//! driver version, a hash of the kernel crate's PTX (a rebuilt kernel tunes again), the
//! kernel, the launch shape (threads per block and the grid's block count rounded up to a
//! power of two) and the data size (the elements of the kernel's slice parameters together,
//! rounded up to a power of two, since a grid-stride kernel keeps one grid for any size);
//! CubeCL buckets its autotune keys the same way.
//!
//! The file is `$LOOKAHEAD_AUTOTUNE_CACHE`, else `$XDG_CACHE_HOME/lookahead/autotune.tsv`,
//! else `$HOME/.cache/lookahead/autotune.tsv`; `LOOKAHEAD_AUTOTUNE_CACHE=off` keeps decisions
//! in the process only. One line per decision, tab-separated, ending in a checksum of the
//! rest: a line that does not check out (a torn write, an edit) is ignored, not trusted. Lines
//! are appended in one `write` each, so processes tuning at once do not corrupt each other;
//! the last line for a key wins.
//!
//! Environment variables, read once per process:
//!
//! | variable | effect |
//! | --- | --- |
//! | `LOOKAHEAD_AUTOTUNE=off` / `plain` | no tuning: every `level = auto` kernel runs its plain entry |
//! | `LOOKAHEAD_AUTOTUNE=l2_d4` (any candidate name: `l2`, `l2_evict_last_d2`, `bulk`, ...) | no tuning: every such kernel runs that candidate (at its own first distance when none is named; its plain entry when it lacks the level) |
//! | `LOOKAHEAD_AUTOTUNE_PRINT=1` | each decision (measured, cached or forced) is printed to stderr once |
//! | `LOOKAHEAD_AUTOTUNE_CACHE=<file>` / `off` | where decisions are kept, or nowhere |

use std::collections::HashMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::autotune::Variant;

/// Where a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Measured in this process.
    Measured,
    /// Read from the decision cache file (no tuning launches).
    Cached,
    /// Set by `LOOKAHEAD_AUTOTUNE` (no tuning launches).
    Forced,
}

/// A decision as the cache file keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The candidate chosen.
    pub variant: Variant,
    /// Its median milliseconds when it was measured.
    pub median_ms: f32,
    /// The plain entry's median milliseconds then (NaN when it was eliminated unmeasured).
    pub plain_ms: f32,
}

/// What `LOOKAHEAD_AUTOTUNE` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Measure (the default).
    Tune,
    /// Always this candidate (or the plain entry, for a kernel without its level), no
    /// measurement.
    Force(Variant),
}

impl Mode {
    /// Parses `LOOKAHEAD_AUTOTUNE`'s value (`None`: unset).
    pub fn parse(value: Option<&str>) -> Result<Mode, String> {
        match value.map(str::trim) {
            None | Some("") | Some("on") | Some("tune") => Ok(Mode::Tune),
            Some("off") => Ok(Mode::Force(Variant::PLAIN)),
            Some(other) => Variant::parse(other).map(Mode::Force).ok_or_else(|| {
                format!(
                "LOOKAHEAD_AUTOTUNE={other} is not understood: write on, off, plain, a level (l2, \
                 l2_evict_last, bulk, ...) or a level at a distance (l2_d4)"
            )
            }),
        }
    }

    /// The process's mode, from the environment (read once; a value not understood is
    /// reported on stderr once and tuning stays on).
    pub fn from_env() -> Mode {
        static MODE: OnceLock<Mode> = OnceLock::new();
        *MODE.get_or_init(|| {
            Mode::parse(std::env::var("LOOKAHEAD_AUTOTUNE").ok().as_deref()).unwrap_or_else(|e| {
                eprintln!("lookahead: {e}; tuning stays on");
                Mode::Tune
            })
        })
    }
}

/// Whether decisions are printed (`LOOKAHEAD_AUTOTUNE_PRINT`).
pub fn print_decisions() -> bool {
    static PRINT: OnceLock<bool> = OnceLock::new();
    *PRINT.get_or_init(|| {
        std::env::var("LOOKAHEAD_AUTOTUNE_PRINT").is_ok_and(|v| !matches!(v.trim(), "" | "0"))
    })
}

/// The cache file's default place (see the module docs), or `None` when it is off or no
/// home is known.
pub fn default_path() -> Option<PathBuf> {
    match std::env::var_os("LOOKAHEAD_AUTOTUNE_CACHE") {
        Some(v) if v == "off" => return None,
        Some(v) if !v.is_empty() => return Some(PathBuf::from(v)),
        _ => {}
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("lookahead").join("autotune.tsv"))
}

/// 64-bit FNV-1a, for the PTX hash and the line checksums (stable across runs and builds,
/// unlike `std`'s hasher).
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const HEADER: &str =
    "# lookahead autotune decisions v2: key, variant, its median ms, plain median ms, checksum";

/// One line of the file for `key`.
fn line(key: &str, d: &Decision) -> String {
    let body = format!(
        "{key}\t{}\t{}\t{}",
        d.variant.name(),
        d.median_ms,
        d.plain_ms
    );
    format!("{body}\t{:016x}\n", fnv64(body.as_bytes()))
}

/// The decision a line holds, when its checksum and fields check out.
fn parse_line(l: &str) -> Option<(String, Decision)> {
    let (body, sum) = l.rsplit_once('\t')?;
    if u64::from_str_radix(sum.trim(), 16).ok()? != fnv64(body.as_bytes()) {
        return None;
    }
    let mut f = body.split('\t');
    let (key, variant, median, plain) = (f.next()?, f.next()?, f.next()?, f.next()?);
    Some((
        key.to_string(),
        Decision {
            variant: Variant::parse(variant)?,
            median_ms: median.parse().ok()?,
            plain_ms: plain.parse().ok()?,
        },
    ))
}

/// The decisions of one cache file, in memory, and the file they are appended to.
#[derive(Debug, Default)]
pub struct DecisionStore {
    path: Option<PathBuf>,
    decisions: Mutex<HashMap<String, Decision>>,
}

impl DecisionStore {
    /// The decisions in `path` (none when it does not exist or is `None`). Lines that do
    /// not check out are skipped.
    pub fn open(path: Option<PathBuf>) -> DecisionStore {
        let decisions = path
            .as_deref()
            .and_then(|p| fs::read_to_string(p).ok())
            .map(|text| text.lines().filter_map(parse_line).collect())
            .unwrap_or_default();
        DecisionStore {
            path,
            decisions: Mutex::new(decisions),
        }
    }

    /// The file, if decisions are kept in one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The decision for `key`, if one was made before.
    pub fn get(&self, key: &str) -> Option<Decision> {
        lock(&self.decisions).get(key).cloned()
    }

    /// Every decision known, by key.
    pub fn all(&self) -> Vec<(String, Decision)> {
        let mut v: Vec<_> = lock(&self.decisions)
            .iter()
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Keeps `decision` for `key` and appends it to the file. A file that cannot be written
    /// (read-only home, full disk) costs the next process its tuning launches only: the
    /// error is reported on stderr once, not returned.
    pub fn put(&self, key: &str, decision: Decision) {
        lock(&self.decisions).insert(key.to_string(), decision.clone());
        let Some(path) = &self.path else { return };
        if let Err(e) = append(path, &line(key, &decision)) {
            static REPORTED: OnceLock<()> = OnceLock::new();
            REPORTED.get_or_init(|| {
                eprintln!(
                    "lookahead: could not keep a tuning decision in {}: {e} (set \
                     LOOKAHEAD_AUTOTUNE_CACHE to a writable file, or to off)",
                    path.display()
                )
            });
        }
    }
}

fn append(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let fresh = !path.exists();
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let text = if fresh {
        format!("{HEADER}\n{line}")
    } else {
        line.to_string()
    };
    f.write_all(text.as_bytes())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::autotune::Level;

    fn d(variant: Variant, median_ms: f32, plain_ms: f32) -> Decision {
        Decision {
            variant,
            median_ms,
            plain_ms,
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("lookahead-decisions-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir.join("nested").join("autotune.tsv")
    }

    #[test]
    fn decisions_survive_a_new_store_and_the_last_line_wins() {
        let path = temp("roundtrip");
        let store = DecisionStore::open(Some(path.clone()));
        assert!(store.get("k").is_none());
        let a = d(Variant::new(Level::L2, 4), 1.25, 1.5);
        let b = d(Variant::PLAIN, 1.0, 1.0);
        store.put("k", a.clone());
        store.put("other", a.clone());
        store.put("k", b.clone());
        let again = DecisionStore::open(Some(path.clone()));
        assert_eq!(again.get("k"), Some(b));
        assert_eq!(again.get("other"), Some(a));
        assert!(fs::read_to_string(&path)
            .unwrap()
            .starts_with("# lookahead autotune"));
        fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).ok();
    }

    #[test]
    fn a_line_that_does_not_check_out_is_ignored() {
        let path = temp("corrupt");
        let store = DecisionStore::open(Some(path.clone()));
        store.put("good", d(Variant::new(Level::L2, 4), 1.0, 2.0));
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str(&line("edited", &d(Variant::PLAIN, 1.0, 1.0)).replace("plain", "l2_d4"));
        text.push_str("torn line without a checksum");
        fs::write(&path, text).unwrap();
        let again = DecisionStore::open(Some(path.clone()));
        assert!(again.get("good").is_some());
        assert!(again.get("edited").is_none());
        assert_eq!(again.all().len(), 1);
        fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).ok();
    }

    #[test]
    fn modes_parse_and_refuse_nonsense() {
        assert_eq!(Mode::parse(None), Ok(Mode::Tune));
        assert_eq!(Mode::parse(Some("off")), Ok(Mode::Force(Variant::PLAIN)));
        assert_eq!(Mode::parse(Some("plain")), Ok(Mode::Force(Variant::PLAIN)));
        assert_eq!(
            Mode::parse(Some(" l2_evict_last_d2 ")),
            Ok(Mode::Force(Variant::new(Level::L2EvictLast, 2)))
        );
        assert_eq!(
            Mode::parse(Some("hinted")),
            Ok(Mode::Force(Variant::new(Level::L2, 0)))
        );
        assert!(Mode::parse(Some("fast"))
            .unwrap_err()
            .contains("on, off, plain, a level"));
    }

    #[test]
    fn no_path_keeps_decisions_in_memory_only() {
        let store = DecisionStore::open(None);
        store.put("k", d(Variant::PLAIN, 1.0, 1.0));
        assert!(store.get("k").is_some());
        assert!(store.path().is_none());
    }

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
