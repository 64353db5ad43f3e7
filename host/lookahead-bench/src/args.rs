//! Command-line checks: `clap` value parsers whose errors say what is accepted, and a parse
//! that hands negative numbers to them (clap would otherwise take `-1` for a flag), so a bad
//! value fails before anything is measured with a message that names the flag and the range:
//!
//! ```text
//! error: invalid value '-1' for '--gib <GIB>': expected a whole number of at least 1
//! ```

use std::fmt::Display;
use std::str::FromStr;

use clap::error::ErrorKind;
use clap::Parser;

/// Checks of a program's arguments that need more than one flag, run right after clap has
/// parsed them; the default accepts everything.
pub trait Validate: Parser {
    /// `Err(message)` when the flags do not go together; the message names the flags and
    /// what is accepted (see [`at_most`]).
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Parses the process's arguments into `A` and [validates](Validate) them, every option
/// allowed a leading `-` in its value so that negative numbers reach the value parsers;
/// prints clap's message and exits (status 2, or 0 for `--help`) when they do not parse.
pub fn parse<A: Validate>() -> A {
    try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// [`parse`] over `args` (the program's name first), returning clap's error.
pub fn try_parse_from<A, I, T>(args: I) -> Result<A, clap::Error>
where
    A: Validate,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = A::command().mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    });
    let mut matches = cmd.try_get_matches_from_mut(args)?;
    let parsed = A::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))?;
    parsed
        .validate()
        .map_err(|message| cmd.error(ErrorKind::ValueValidation, message))?;
    Ok(parsed)
}

/// [`try_parse_from`] over the arguments that follow the program's name, for tests:
/// `try_parse::<Args>(&["--reps", "0"])`.
pub fn try_parse<A: Validate>(args: &[&str]) -> Result<A, clap::Error> {
    let name = A::command().get_name().to_string();
    try_parse_from(std::iter::once(name.as_str()).chain(args.iter().copied()))
}

/// Checks that the value `value` of `flag` is no greater than `limit`, the value of
/// `limit_flag`: `--nprobe 9: expected at most --nlist (8)`.
pub fn at_most<T: PartialOrd + Display>(
    flag: &str,
    value: T,
    limit_flag: &str,
    limit: T,
) -> Result<(), String> {
    if value > limit {
        return Err(format!(
            "{flag} {value}: expected at most {limit_flag} ({limit})"
        ));
    }
    Ok(())
}

/// Checks that `path`, the value of `flag`, is a file this process can open for reading, so
/// a program that needs a GPU refuses a missing input before looking for one: `--fvecs
/// /nonexistent: cannot be read (No such file or directory (os error 2))`.
pub fn readable_file(flag: &str, path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    match std::fs::File::open(path).and_then(|f| f.metadata()) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!("{flag} {shown}: expected a file, found a folder")),
        Err(e) => Err(format!("{flag} {shown}: cannot be read ({e})")),
    }
}

/// Checks that `n` elements of `bytes_each` bytes of host memory (what a program holds per
/// element at its peak) fit in the memory this machine has available, so a size too large
/// is refused with the flag named instead of aborting in the allocator ("memory allocation
/// failed", "capacity overflow"):
///
/// ```
/// let e = lookahead_bench::args::host_memory_for("--n", u64::MAX, 40).unwrap_err();
/// assert!(e.starts_with("--n 18446744073709551615: needs more than"), "{e}");
/// ```
pub fn host_memory_for(flag: &str, n: u64, bytes_each: u64) -> Result<(), String> {
    check_host_bytes(flag, n, bytes_each, available_host_bytes())
}

/// [`host_memory_for`] against `available` bytes (unknown: only overflow is refused).
fn check_host_bytes(
    flag: &str,
    n: u64,
    bytes_each: u64,
    available: Option<u64>,
) -> Result<(), String> {
    // Beyond `isize::MAX` bytes no allocation can succeed, whatever the machine.
    let limit = available.map_or(isize::MAX as u64, |a| a.min(isize::MAX as u64));
    match n.checked_mul(bytes_each) {
        Some(bytes) if bytes <= limit => Ok(()),
        Some(bytes) => Err(format!(
            "{flag} {n}: needs {bytes} bytes of host memory ({bytes_each} bytes an element) and \
             {limit} are available: use a smaller {flag}"
        )),
        None => Err(format!(
            "{flag} {n}: needs more than {} bytes of host memory ({bytes_each} bytes an \
             element): use a smaller {flag}",
            u64::MAX
        )),
    }
}

/// The host memory available for new allocations (Linux: `MemAvailable` of
/// `/proc/meminfo`), or `None` where it cannot be read.
fn available_host_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A value parser for a whole number of at least `min`:
/// `#[arg(long, value_parser = at_least(1usize))]`.
pub fn at_least<T>(min: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    move |s| whole(s, min, None)
}

/// A value parser for a whole number from `min` to `max`, both included.
pub fn in_range<T>(
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    move |s| whole(s, min, Some(max))
}

fn whole<T: FromStr + PartialOrd + Display + Copy>(
    s: &str,
    min: T,
    max: Option<T>,
) -> Result<T, String> {
    let ok = |v: &T| *v >= min && max.is_none_or(|m| *v <= m);
    let expected = match max {
        Some(max) => format!("expected a whole number from {min} to {max}"),
        None => format!("expected a whole number of at least {min}"),
    };
    let t = s.trim();
    match t.parse::<T>() {
        Ok(v) if ok(&v) => Ok(v),
        // Digits the type cannot hold: say so, rather than the lower bound it does meet.
        Err(_) if is_whole(t.strip_prefix('+').unwrap_or(t)) => {
            Err(format!("{t} is too large for this option"))
        }
        _ => Err(expected),
    }
}

/// Whether `s` is one or more decimal digits.
fn is_whole(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A value parser for a finite number greater than `above` and, with `at_most`, no greater
/// than that: `float_range(0.0, None)` takes any positive number, `float_range(0.0,
/// Some(100.0))` a percentage.
pub fn float_range(
    above: f64,
    at_most: Option<f64>,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s| {
        let ok = |v: f64| v.is_finite() && v > above && at_most.is_none_or(|m| v <= m);
        match s.trim().parse::<f64>() {
            Ok(v) if ok(v) => Ok(v),
            _ => Err(match at_most {
                Some(m) => format!("expected a number greater than {above} and at most {m}"),
                None => format!("expected a number greater than {above}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser, Debug)]
    struct Demo {
        /// Repeats.
        #[arg(long, default_value_t = 5, value_parser = at_least(1usize))]
        reps: usize,
        /// Size.
        #[arg(long, default_value_t = 1.0, value_parser = float_range(0.0, None))]
        gib: f64,
        /// Percentages.
        #[arg(long, value_delimiter = ',', value_parser = float_range(0.0, Some(100.0)))]
        percent: Vec<f64>,
        /// Dimensions.
        #[arg(long, default_value_t = 8, value_parser = in_range(1u32, 128))]
        dim: u32,
        /// A switch.
        #[arg(long)]
        quick: bool,
    }

    impl Validate for Demo {
        fn validate(&self) -> Result<(), String> {
            at_most("--reps", self.reps as u32, "--dim", self.dim)
        }
    }

    fn error(args: &[&str]) -> String {
        try_parse::<Demo>(args).unwrap_err().to_string()
    }

    #[test]
    fn takes_values_in_range() {
        let d: Demo = try_parse_from([
            "demo",
            "--reps",
            "3",
            "--gib",
            "0.5",
            "--percent",
            "1,100",
            "--quick",
        ])
        .unwrap();
        assert_eq!(
            (d.reps, d.gib, d.percent, d.dim, d.quick),
            (3, 0.5, vec![1.0, 100.0], 8, true)
        );
    }

    #[test]
    fn names_the_flag_and_the_range() {
        let e = error(&["--reps", "0"]);
        assert!(
            e.contains("'--reps <REPS>'") && e.contains("expected a whole number of at least 1"),
            "{e}"
        );
        let e = error(&["--reps", "-1"]);
        assert!(
            e.contains("invalid value '-1'") && e.contains("at least 1"),
            "{e}"
        );
        let e = error(&["--gib", "-1"]);
        assert!(
            e.contains("'--gib <GIB>'") && e.contains("greater than 0"),
            "{e}"
        );
        let e = error(&["--gib", "nan"]);
        assert!(e.contains("greater than 0"), "{e}");
        let e = error(&["--percent", "5,101"]);
        assert!(e.contains("greater than 0 and at most 100"), "{e}");
        let e = error(&["--dim", "129"]);
        assert!(
            e.contains("'--dim <DIM>'") && e.contains("from 1 to 128"),
            "{e}"
        );
        let e = error(&["--dim", "x"]);
        assert!(e.contains("from 1 to 128"), "{e}");
        let e = error(&["--reps", "99999999999999999999999"]);
        assert!(
            e.contains("99999999999999999999999 is too large for this option")
                && !e.contains("at least"),
            "{e}"
        );
        let e = error(&["--dim", "4294967296"]);
        assert!(e.contains("4294967296 is too large"), "{e}");
        let e = error(&["--reps", "-99999999999999999999999"]);
        assert!(!e.contains("too large") && e.contains("at least 1"), "{e}");
        let e = error(&["--dim", "4"]);
        assert!(e.contains("--reps 5: expected at most --dim (4)"), "{e}");
    }

    #[test]
    fn sizes_are_checked_against_host_memory() {
        assert_eq!(check_host_bytes("--n", 1000, 40, Some(40_000)), Ok(()));
        let e = check_host_bytes("--n", 1001, 40, Some(40_000)).unwrap_err();
        assert_eq!(
            e,
            "--n 1001: needs 40040 bytes of host memory (40 bytes an element) and 40000 are \
             available: use a smaller --n"
        );
        let e = check_host_bytes("--n", u64::MAX, 4, None).unwrap_err();
        assert!(
            e.contains("needs more than 18446744073709551615 bytes"),
            "{e}"
        );
        // Unknown memory: still nothing past what an allocation can be.
        assert!(check_host_bytes("--n", 1 << 62, 4, None).is_err());
        assert_eq!(check_host_bytes("--n", 1 << 20, 4, None), Ok(()));
        // This machine's own memory: 400 GB for 1e11 floats is refused before any allocation.
        let e = host_memory_for("--n", 100_000_000_000, 40).unwrap_err();
        assert!(e.contains("use a smaller --n"), "{e}");
        assert_eq!(host_memory_for("--n", 1000, 40), Ok(()));
    }

    #[test]
    fn an_input_file_must_be_readable() {
        let missing = std::path::Path::new("/nonexistent/base.fvecs");
        let e = readable_file("--fvecs", missing).unwrap_err();
        assert!(
            e.starts_with("--fvecs /nonexistent/base.fvecs: cannot be read ("),
            "{e}"
        );
        let dir = std::env::temp_dir();
        let e = readable_file("--fvecs", &dir).unwrap_err();
        assert!(e.ends_with("expected a file, found a folder"), "{e}");
        let file = dir.join(format!("lookahead_bench_readable_{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(readable_file("--fvecs", &file), Ok(()));
        std::fs::remove_file(&file).unwrap();
    }
}
