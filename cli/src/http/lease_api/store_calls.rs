//! The lease API's calls to the lease store: each on a thread of its own, off the runtime,
//! and at most [`MAX_STORE_CALLS`] at once.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::Semaphore;

use crate::http::plumbing::ApiError;

/// At most this many lease store calls run at once, each on a thread of its own, so that
/// no client (not even one with the token) can make the service start threads without end.
pub const MAX_STORE_CALLS: usize = 64;

/// How long a call waits for one of those slots before its request gets a 503.
pub const STORE_CALL_WAIT: Duration = Duration::from_secs(5);

/// Runs `work` on a thread of its own and waits for it without holding up the runtime.
/// Not `spawn_blocking`: the etcd store refuses to run on any thread of a Tokio runtime,
/// blocking pool included (it runs its own).
pub async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    static STORE_CALLS: LazyLock<Arc<Semaphore>> =
        LazyLock::new(|| Arc::new(Semaphore::new(MAX_STORE_CALLS)));
    off_runtime_within(&STORE_CALLS, STORE_CALL_WAIT, work).await
}

/// [`off_runtime`], taking one of `calls`' slots (waiting at most `wait` for it) for as
/// long as the work runs, even if the request goes away first.
async fn off_runtime_within<T: Send + 'static>(
    calls: &Arc<Semaphore>,
    wait: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let busy = || {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("all {MAX_STORE_CALLS} lease store calls are busy; retry"),
        )
    };
    let slot = tokio::time::timeout(wait, Arc::clone(calls).acquire_owned())
        .await
        .map_err(|_| busy())?
        .map_err(|_| busy())?;
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("idgen-lease-api".into())
        .spawn(move || {
            let value = work();
            // Free before the answer goes, so that a slot is never held past its work.
            drop(slot);
            let _ = done.send(value);
        })
        .map_err(|error| {
            ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot start a thread to call the lease store: {error}"),
            )
        })?;
    result.await.map_err(|_| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the lease store call panicked".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_store_call_waits_for_a_free_slot_and_holds_it_while_it_runs() {
        let calls = Arc::new(Semaphore::new(1));
        let taken = Arc::clone(&calls).acquire_owned().await.unwrap();
        let wait = Duration::from_millis(50);
        match off_runtime_within(&calls, wait, || ()).await {
            Err(ApiError(status, message)) => {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
                assert!(message.contains("busy"), "{message}");
            }
            Ok(()) => panic!("ran with every slot taken"),
        }
        drop(taken);
        // While the work runs, its slot is taken; once it is done, free again.
        let slots = Arc::clone(&calls);
        let during = off_runtime_within(&calls, wait, move || slots.available_permits()).await;
        assert_eq!(during.ok(), Some(0));
        assert_eq!(calls.available_permits(), 1);
    }
}
