//! Blocking work (reading and writing files) from async code, off the runtime's workers
//! (crate-private; no imports from the crate).
//!
//! Invariant: an async function of this crate never calls `std::fs` (or anything else that waits
//! on the disk) on the thread that polls it; it hands the call to [`unblock`], which runs it on
//! tokio's blocking pool, so the runtime's workers go on polling other tasks meanwhile.

use std::sync::{Arc, Mutex, PoisonError};

/// Runs `f` on tokio's blocking pool and resolves to its result; a panic in `f` resumes in the
/// caller. Outside a tokio runtime (a caller polling us on an executor of its own) there is no
/// pool to use, and `f` runs inline as it would have without this function.
///
/// If the runtime shuts down before the pool starts `f`, `f` runs inline: the caller still gets
/// its result.
pub(crate) async fn unblock<T, F>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return f();
    };
    // Taken by whichever runs it: the pool, or this caller if the pool never started it.
    let slot = Arc::new(Mutex::new(Some(f)));
    let job = {
        let slot = slot.clone();
        move || {
            let f = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            f.map(|f| f())
        }
    };
    match runtime.spawn_blocking(job).await {
        Ok(Some(value)) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled (the runtime shut down before the job started): the job took nothing.
        Ok(None) | Err(_) => {
            let f = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            f.expect("the blocking job never started, so `f` is still here")()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn runs_off_the_polling_thread_and_returns_the_result() {
        let here = std::thread::current().id();
        let (value, there) = unblock(|| (7, std::thread::current().id())).await;
        assert_eq!(value, 7);
        assert_ne!(here, there);
    }

    #[test]
    fn outside_a_runtime_it_runs_inline() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let here = std::thread::current().id();
        let mut there = std::pin::pin!(unblock(move || std::thread::current().id()));
        let polled = there.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert_eq!(polled, Poll::Ready(here));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_panic_resumes_in_the_caller() {
        let caught = tokio::spawn(unblock(|| -> u8 { panic!("boom") }))
            .await
            .unwrap_err();
        assert!(caught.is_panic());
    }
}
