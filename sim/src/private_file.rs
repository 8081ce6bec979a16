//! Writing the simulator's kubeconfig, which holds its token: a new file only the owner can read
//! (0600 on Unix), under a unique temporary name beside the target, then renamed over it, so no
//! reader sees it half-written. (A copy of the library's crate-private writer, which the library
//! keeps for discovery's last-known-good file.)
//!
//! The temporary name is created with `O_CREAT | O_EXCL` (`create_new`), so it never follows a
//! symlink planted in a shared directory nor reuses another writer's file; `rename` then replaces
//! the target itself (a symlink at the target is replaced, not followed).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes temporary names unique within the process (the pid makes them unique across processes).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically, readable and writable by the owner only.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary_name(path);
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        // On disk before the rename makes it visible: a crash leaves the old file or the new one.
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `.<name>.<pid>.<n>.tmp` in the target's directory (a rename stays within one file system).
fn temporary_name(path: &Path) -> PathBuf {
    // Relaxed: only uniqueness of the number matters, not ordering with other memory.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_atomic_and_unique() {
        let dir = std::env::temp_dir().join(format!("informer-sim-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        std::fs::write(&path, b"old").unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        assert_ne!(temporary_name(&path), temporary_name(&path));
        // Only the target is left: no temporary file behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
        // A failed write (no such directory) leaves nothing and says why.
        assert!(write(&dir.join("missing/x"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
