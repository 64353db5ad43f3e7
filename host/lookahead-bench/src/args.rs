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
    match s.trim().parse::<T>() {
        Ok(v) if ok(&v) => Ok(v),
        _ => Err(match max {
            Some(max) => format!("expected a whole number from {min} to {max}"),
            None => format!("expected a whole number of at least {min}"),
        }),
    }
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
        let e = error(&["--dim", "4"]);
        assert!(e.contains("--reps 5: expected at most --dim (4)"), "{e}");
    }
}
