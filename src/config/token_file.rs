//! [`TokenFile`]: a bearer token read from a file and re-read periodically, so a rotated token
//! (projected service-account tokens are rotated by the kubelet) is picked up without a restart.
//!
//! Invariants: the file is re-read at most once per refresh interval (default one minute) unless
//! the server rejected the token; a failed re-read keeps the previous token (the kubelet replaces
//! the file atomically, but a transient error must not take the client down); the first read must
//! succeed.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Secret, TokenProvider};
use crate::error::{Error, Result};

/// How often a token file is re-read when nothing forces it.
pub const DEFAULT_TOKEN_REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// A [`TokenProvider`] that reads a token from a file (in-cluster service-account token,
/// kubeconfig `tokenFile`) and re-reads it every refresh interval or after a 401.
///
/// ```no_run
/// # async fn demo() -> informer::Result<()> {
/// use informer::config::{TokenFile, TokenProvider};
/// let tokens = TokenFile::new("/var/run/secrets/kubernetes.io/serviceaccount/token")?;
/// let token = tokens.token().await?;
/// # let _ = token; Ok(()) }
/// ```
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    refresh_interval: Duration,
    cached: Mutex<Cached>,
}

#[derive(Debug)]
struct Cached {
    token: Secret,
    read_at: Instant,
    /// Set by `invalidate`: the next `token()` re-reads regardless of the interval.
    stale: bool,
}

impl TokenFile {
    /// Reads `path` now (failing if it cannot be read or is empty) and re-reads it every
    /// [`DEFAULT_TOKEN_REFRESH_INTERVAL`].
    pub fn new(path: impl Into<PathBuf>) -> Result<TokenFile> {
        Self::with_refresh_interval(path, DEFAULT_TOKEN_REFRESH_INTERVAL)
    }

    /// Like [`new`](Self::new) with another re-read interval (tests use a short one).
    ///
    /// ```no_run
    /// # fn demo() -> informer::Result<()> {
    /// let tokens = informer::config::TokenFile::with_refresh_interval(
    ///     "/tmp/token",
    ///     std::time::Duration::from_secs(10),
    /// )?;
    /// assert_eq!(tokens.path(), std::path::Path::new("/tmp/token"));
    /// # Ok(()) }
    /// ```
    pub fn with_refresh_interval(
        path: impl Into<PathBuf>,
        refresh_interval: Duration,
    ) -> Result<TokenFile> {
        let path = path.into();
        let token = read_token(&path)?;
        Ok(TokenFile {
            path,
            refresh_interval,
            cached: Mutex::new(Cached {
                token,
                read_at: Instant::now(),
                stale: false,
            }),
        })
    }

    /// The file the token is read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cached token, unless a re-read is due (the interval passed, or it was invalidated).
    fn fresh(&self) -> Option<Secret> {
        let cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let due = cached.stale || cached.read_at.elapsed() >= self.refresh_interval;
        (!due).then(|| cached.token.clone())
    }

    /// Takes in the outcome of a re-read and returns the token to use.
    fn reread(&self, read: Result<Secret>) -> Result<Secret> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        match read {
            Ok(token) => {
                cached.token = token;
                cached.read_at = Instant::now();
                cached.stale = false;
            }
            // Keep the old token; try again at the next interval (or next call when stale).
            Err(_) if !cached.stale => cached.read_at = Instant::now(),
            Err(e) => return Err(e),
        }
        Ok(cached.token.clone())
    }
}

impl TokenProvider for TokenFile {
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<Secret>> + Send + '_>> {
        Box::pin(async move {
            if let Some(token) = self.fresh() {
                return Ok(token);
            }
            // Due (once a refresh interval): the file is read off the runtime's workers
            // (`blocking`). Two callers that find it due at once both read it; the later wins.
            let path = self.path.clone();
            let read = crate::blocking::unblock(move || read_token(&path)).await;
            self.reread(read)
        })
    }

    fn invalidate(&self) {
        self.cached.lock().unwrap_or_else(|p| p.into_inner()).stale = true;
    }
}

/// The trimmed content of a token file; an error names the file.
fn read_token(path: &Path) -> Result<Secret> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("token file {}: {e}", path.display())))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Error::Config(format!(
            "token file {}: the file is empty",
            path.display()
        )));
    }
    Ok(Secret::new(token))
}
