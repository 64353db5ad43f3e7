//! One measurement of either side, as both write it: the CSV that `cpp/faiss_side.cpp`
//! writes and `faiss_compare run` writes in the same columns, so `report` can join them.

use std::fmt::Write as _;
use std::path::Path;

/// The CSV header both sides write.
pub const HEADER: &str = "system,measure,variant,queries,p50_ms,p99_ms,qps,recall10,seconds";

/// One row: what was measured (`measure`, e.g. `latency`; `variant`, e.g. `graph`), on how
/// many queries, and the numbers (0 where a column does not apply).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `faiss` or `lookahead`.
    pub system: String,
    /// `build`, `latency`, `throughput`, `unified_cold`, `unified_warm`.
    pub measure: String,
    /// How: `graph`/`launched` (latency), a policy or a query set (cold and warm), a build.
    pub variant: String,
    /// Queries per batch (latency) or per search; vectors for a build.
    pub queries: u64,
    /// Median and 99th percentile, milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// Queries per second at the median.
    pub qps: f64,
    /// Recall@10 against the exact neighbours (0: not measured).
    pub recall10: f64,
    /// The median's seconds (a build's seconds).
    pub seconds: f64,
}

impl Row {
    /// The median in seconds: the p50 where the row has one (a latency row's `seconds` may
    /// be 0), else `seconds` (a build).
    pub fn median_s(&self) -> f64 {
        if self.p50_ms > 0.0 {
            self.p50_ms / 1e3
        } else {
            self.seconds
        }
    }

    /// The row as a CSV line (no newline).
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "{},{},{},{},{},{},{},{},{}",
            self.system,
            self.measure,
            self.variant,
            self.queries,
            self.p50_ms,
            self.p99_ms,
            self.qps,
            self.recall10,
            self.seconds
        );
        s
    }

    /// Parses a CSV line in [`HEADER`]'s columns.
    pub fn parse(line: &str) -> Result<Row, String> {
        let f: Vec<&str> = line.trim_end().split(',').collect();
        if f.len() != 9 {
            return Err(format!("expected 9 columns, found {}: `{line}`", f.len()));
        }
        let num = |i: usize| -> Result<f64, String> {
            f[i].parse::<f64>()
                .map_err(|e| format!("column {} of `{line}`: {e}", i + 1))
        };
        Ok(Row {
            system: f[0].to_string(),
            measure: f[1].to_string(),
            variant: f[2].to_string(),
            queries: f[3]
                .parse()
                .map_err(|e| format!("column 4 of `{line}`: {e}"))?,
            p50_ms: num(4)?,
            p99_ms: num(5)?,
            qps: num(6)?,
            recall10: num(7)?,
            seconds: num(8)?,
        })
    }
}

/// Every row of a CSV file written with [`HEADER`].
pub fn read(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.trim_end() == HEADER => {}
        _ => {
            return Err(format!(
                "{}: the first line is not `{HEADER}`",
                path.display()
            ))
        }
    }
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| Row::parse(l).map_err(|e| format!("{}: {e}", path.display())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_survives_its_csv_line() {
        let row = Row {
            system: "lookahead".into(),
            measure: "latency".into(),
            variant: "graph".into(),
            queries: 16,
            p50_ms: 0.109,
            p99_ms: 0.125,
            qps: 146_788.5,
            recall10: 0.9995,
            seconds: 0.000109,
        };
        assert_eq!(Row::parse(&row.to_csv()), Ok(row));
    }

    #[test]
    fn a_short_or_malformed_line_is_refused_with_its_text() {
        let e = Row::parse("faiss,latency,resident,1,0.1").unwrap_err();
        assert!(e.contains("expected 9 columns"), "{e}");
        let e = Row::parse("faiss,latency,resident,one,0,0,0,0,0").unwrap_err();
        assert!(e.contains("column 4"), "{e}");
    }
}
