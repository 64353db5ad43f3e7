//! Tables of results: built row by row, written as Markdown for people and as CSV for
//! programs.

use std::fmt;

use crate::error::Result;

/// How a Markdown column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// Markdown's default (`---`), which renderers show left-aligned.
    #[default]
    Left,
    /// Right-aligned (`---:`), for numbers.
    Right,
}

impl Align {
    fn rule(self) -> &'static str {
        match self {
            Align::Left => "---",
            Align::Right => "---:",
        }
    }
}

/// A table: a header row and rows of text cells, as many cells in each row as headers.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers, every column [`Align::Left`].
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(headers: I) -> Table {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        Table {
            align: vec![Align::Left; headers.len()],
            headers,
            rows: Vec::new(),
        }
    }

    /// Aligns column `column` (from 0) as `align` in Markdown.
    ///
    /// # Panics
    /// If the table has no such column.
    pub fn align(mut self, column: usize, align: Align) -> Table {
        self.align[column] = align;
        self
    }

    /// Appends a row.
    ///
    /// # Panics
    /// If the row does not have one cell per column.
    pub fn push<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        let row: Vec<String> = cells.into_iter().map(Into::into).collect();
        assert_eq!(
            row.len(),
            self.headers.len(),
            "row has {} cells, table has {} columns",
            row.len(),
            self.headers.len()
        );
        self.rows.push(row);
    }

    /// The table in Markdown: `| a | b |` lines, the header's rule showing each column's
    /// alignment, `|` inside a cell escaped. Ends with a newline.
    pub fn to_markdown(&self) -> String {
        let line = |cells: &mut dyn Iterator<Item = String>| {
            let cells: Vec<String> = cells.collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut md = line(&mut self.headers.iter().map(|h| escape(h)));
        md += &line(&mut self.align.iter().map(|a| a.rule().to_string()));
        for row in &self.rows {
            md += &line(&mut row.iter().map(|c| escape(c)));
        }
        md
    }

    /// The table as CSV (RFC 4180): a header line, then one line per row; cells holding a
    /// comma, a quote or a line break are quoted.
    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.headers)?;
        for row in &self.rows {
            w.write_record(row)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| csv::Error::from(e.into_error()))?;
        Ok(String::from_utf8(bytes).expect("CSV of UTF-8 cells is UTF-8"))
    }
}

impl fmt::Display for Table {
    /// The table in Markdown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_markdown())
    }
}

fn escape(cell: &str) -> String {
    cell.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["case", "ms", "note"]).align(1, Align::Right);
        t.push(["(a) one range", "84.81", "128 pieces, 4096 MiB"]);
        t.push(["a|b", "1.00", "said \"hi\""]);
        t
    }

    #[test]
    fn markdown_has_alignment_and_escapes_pipes() {
        assert_eq!(
            sample().to_markdown(),
            "| case | ms | note |\n| --- | ---: | --- |\n\
             | (a) one range | 84.81 | 128 pieces, 4096 MiB |\n| a\\|b | 1.00 | said \"hi\" |\n"
        );
    }

    #[test]
    fn csv_quotes_only_what_needs_it() {
        assert_eq!(
            sample().to_csv().unwrap(),
            "case,ms,note\n(a) one range,84.81,\"128 pieces, 4096 MiB\"\n\
             a|b,1.00,\"said \"\"hi\"\"\"\n"
        );
    }

    #[test]
    #[should_panic(expected = "row has 1 cells, table has 3 columns")]
    fn rows_must_fill_every_column() {
        sample().push(["one"]);
    }
}
