//! The results folder: created and checked for writing before a benchmark runs, so a bad
//! `--out` fails at once instead of after the measurements.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A folder results are written into, known to be writable when it was opened. The folders
/// [`OutDir::create`] made are removed again when the last clone is dropped with nothing
/// written through [`OutDir::write`] and nothing else put in them, so a program that fails
/// after opening its results folder (no GPU, a bad argument found later) leaves no empty
/// folders behind.
#[derive(Debug, Clone)]
pub struct OutDir {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// The outermost folder `create` made, if it made any.
    created: Option<PathBuf>,
    written: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(top) = &self.created else { return };
        if self.written.load(Ordering::Relaxed) {
            return;
        }
        // `remove_dir` removes only empty folders: anything put there by other means stays.
        for dir in self.path.ancestors() {
            if std::fs::remove_dir(dir).is_err() || dir == top.as_path() {
                break;
            }
        }
    }
}

impl OutDir {
    /// Creates `path` (with its parents) if it does not exist, then writes and removes a
    /// probe file in it, so that a folder that cannot be written fails here. What it made is
    /// removed again if nothing is ever written there (see [`OutDir`]).
    pub fn create(path: impl Into<PathBuf>) -> Result<OutDir> {
        let path = path.into();
        // A relative path's last ancestor is "", which is no folder to remove.
        let created = path
            .ancestors()
            .filter(|d| !d.as_os_str().is_empty())
            .take_while(|d| !d.exists())
            .last()
            .map(Path::to_path_buf);
        let out = OutDir {
            inner: Arc::new(Inner {
                path: path.clone(),
                created,
                written: AtomicBool::new(false),
            }),
        };
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
        Ok(out)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Writes `contents` to the file `name` in the folder (replacing it); returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> Result<PathBuf> {
        let file = self.inner.path.join(name);
        self.inner.written.store(true, Ordering::Relaxed);
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

    #[test]
    fn folders_made_for_nothing_are_removed_again() {
        let dir =
            std::env::temp_dir().join(format!("lookahead_bench_empty_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Made and dropped unwritten (the program failed before writing): gone, parents too,
        // up to the folder that was there before.
        let out = OutDir::create(dir.join("a/b/c")).unwrap();
        let copy = out.clone();
        drop(out);
        assert!(dir.join("a/b/c").is_dir(), "a clone still holds it");
        drop(copy);
        assert!(!dir.join("a").exists());
        assert!(dir.is_dir());
        // Written: kept.
        let out = OutDir::create(dir.join("a/b")).unwrap();
        out.write("x.md", "hello").unwrap();
        drop(out);
        assert!(dir.join("a/b/x.md").is_file());
        // A folder that was there already is never removed.
        drop(OutDir::create(dir.join("a/b")).unwrap());
        drop(OutDir::create(&dir).unwrap());
        assert!(dir.join("a/b/x.md").is_file());
        // Something put there by other means keeps the folder.
        let out = OutDir::create(dir.join("d")).unwrap();
        std::fs::write(out.path().join("plot.svg"), "<svg/>").unwrap();
        drop(out);
        assert!(dir.join("d/plot.svg").is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
