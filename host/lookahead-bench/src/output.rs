//! The results folder: created and checked for writing before a benchmark runs, so a bad
//! `--out` fails at once instead of after the measurements.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A folder results are written into, known to be writable when it was opened.
#[derive(Debug, Clone)]
pub struct OutDir {
    path: PathBuf,
}

impl OutDir {
    /// Creates `path` (with its parents) if it does not exist, then writes and removes a
    /// probe file in it, so that a folder that cannot be written fails here.
    pub fn create(path: impl Into<PathBuf>) -> Result<OutDir> {
        let path = path.into();
        std::fs::create_dir_all(&path).map_err(|source| Error::Io {
            action: "creating",
            path: path.clone(),
            source,
        })?;
        let probe = path.join(format!(".lookahead-bench-probe-{}", std::process::id()));
        let io = |source| Error::Io {
            action: "writing",
            path: probe.clone(),
            source,
        };
        std::fs::write(&probe, b"probe").map_err(io)?;
        std::fs::remove_file(&probe).map_err(io)?;
        Ok(OutDir { path })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to the file `name` in the folder (replacing it); returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> Result<PathBuf> {
        let file = self.path.join(name);
        std::fs::write(&file, contents).map_err(|source| Error::Io {
            action: "writing",
            path: file.clone(),
            source,
        })?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_writes_and_refuses_what_cannot_be_written() {
        let dir = std::env::temp_dir().join(format!("lookahead_bench_out_{}", std::process::id()));
        let out = OutDir::create(dir.join("a/b")).unwrap();
        let file = out.write("x.md", "hello").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello");
        // Only x.md is left: the probe is removed.
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
        // A folder below a file cannot be created.
        let err = OutDir::create(file.join("below")).unwrap_err();
        assert!(err.to_string().starts_with("creating "), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
