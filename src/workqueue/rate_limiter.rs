//! Rate limiters: how long a failed key waits before it is retried (docs/semantics.md W7).
//!
//! A [`RateLimiter`] answers one question, "how long should this key wait before its next try?"
//! ([`RateLimiter::when`]), and keeps whatever per-key or global state it needs to answer it. Each
//! call to `when` counts as one attempt: it advances the limiter. [`RateLimiter::forget`] resets a
//! key once it has been processed successfully.
//!
//! | Type | client-go | Delay |
//! |---|---|---|
//! | [`ItemExponentialRateLimiter`] | `ItemExponentialFailureRateLimiter` | `base * 2^failures`, capped |
//! | [`TokenBucketRateLimiter`] | `BucketRateLimiter` | global token bucket, reservations add up |
//! | [`ItemFastSlowRateLimiter`] | `ItemFastSlowRateLimiter` | `fast` for n attempts, then `slow` |
//! | [`MaxOfRateLimiter`] | `MaxOfRateLimiter` | the largest delay of all (all advance) |
//! | [`MaxWaitRateLimiter`] | `WithMaxWaitRateLimiter` | the inner delay, clamped |
//! | [`DefaultControllerRateLimiter`] | `DefaultControllerRateLimiter` | max(exp 5ms..1000s, 10 qps/100) |
//!
//! Time is read from [`tokio::time::Instant`], so tests can freeze and advance it with
//! `tokio::time::pause`; the token bucket also exposes [`TokenBucketRateLimiter::reserve_at`] to
//! take the clock reading explicitly.
//!
//! Synchronization: limiters are shared between all workers of a queue, so their state sits behind
//! a `std::sync::Mutex`. Every critical section is a map lookup or a little arithmetic and never
//! awaits, so a blocking mutex is cheaper than an async one and cannot be held across a yield.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// Decides how long a key waits before it is retried.
///
/// Implementations must be cheap and must not block: `when` is called by
/// [`WorkQueue::add_rate_limited`](super::WorkQueue::add_rate_limited) on a worker's hot path.
///
/// # Example
///
/// A limiter that always waits one second:
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::RateLimiter;
///
/// struct OneSecond;
///
/// impl<K> RateLimiter<K> for OneSecond {
///     fn when(&self, _key: &K) -> Duration {
///         Duration::from_secs(1)
///     }
///     fn forget(&self, _key: &K) {}
///     fn num_requeues(&self, _key: &K) -> u32 {
///         0
///     }
/// }
///
/// assert_eq!(OneSecond.when(&"a"), Duration::from_secs(1));
/// ```
pub trait RateLimiter<K>: Send + Sync {
    /// Records one more attempt for `key` and returns how long it must wait before that attempt.
    fn when(&self, key: &K) -> Duration;
    /// Clears the history of `key` (call it once `key` was processed successfully).
    fn forget(&self, key: &K);
    /// How many times `key` has been requeued since it was last forgotten.
    fn num_requeues(&self, key: &K) -> u32;
}

impl<K, L: RateLimiter<K> + ?Sized> RateLimiter<K> for Box<L> {
    fn when(&self, key: &K) -> Duration {
        (**self).when(key)
    }
    fn forget(&self, key: &K) {
        (**self).forget(key)
    }
    fn num_requeues(&self, key: &K) -> u32 {
        (**self).num_requeues(key)
    }
}

impl<K, L: RateLimiter<K> + ?Sized> RateLimiter<K> for Arc<L> {
    fn when(&self, key: &K) -> Duration {
        (**self).when(key)
    }
    fn forget(&self, key: &K) {
        (**self).forget(key)
    }
    fn num_requeues(&self, key: &K) -> u32 {
        (**self).num_requeues(key)
    }
}

/// Locks a limiter's state. A panic while holding the lock cannot leave the small maps and numbers
/// in here half-updated in a way that matters, so a poisoned lock is simply taken over.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `base * 2^exponent`, or `max` if that is larger or overflows.
fn capped_exponential(base: Duration, exponent: u32, max: Duration) -> Duration {
    if exponent >= 64 {
        return if base.is_zero() { base } else { max };
    }
    let nanos = base.as_nanos().saturating_mul(1u128 << exponent);
    if nanos >= max.as_nanos() {
        return max;
    }
    // `nanos < max.as_nanos()`, so the seconds fit in a u64.
    Duration::new(
        (nanos / 1_000_000_000) as u64,
        (nanos % 1_000_000_000) as u32,
    )
}

/// Per-key exponential backoff: the n-th consecutive failure of a key waits `base * 2^(n-1)`, at
/// most `max` (client-go `ItemExponentialFailureRateLimiter`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::{ItemExponentialRateLimiter, RateLimiter};
///
/// let limiter = ItemExponentialRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.when(&"b"), Duration::from_millis(5)); // keys are independent
/// assert_eq!(limiter.num_requeues(&"a"), 2);
/// limiter.forget(&"a");
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// ```
#[derive(Debug)]
pub struct ItemExponentialRateLimiter<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash + Clone> ItemExponentialRateLimiter<K> {
    /// A limiter starting at `base` and doubling per failure up to `max`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use informer::workqueue::ItemExponentialRateLimiter;
    /// let limiter: ItemExponentialRateLimiter<String> =
    ///     ItemExponentialRateLimiter::new(Duration::from_millis(1), Duration::from_secs(60));
    /// ```
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// client-go's `DefaultItemBasedRateLimiter`: 1 ms doubling up to 1000 s.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use informer::workqueue::{ItemExponentialRateLimiter, RateLimiter};
    /// let limiter = ItemExponentialRateLimiter::default_item_based();
    /// assert_eq!(limiter.when(&1), Duration::from_millis(1));
    /// ```
    pub fn default_item_based() -> Self {
        Self::new(Duration::from_millis(1), Duration::from_secs(1000))
    }
}

impl<K: Eq + Hash + Clone + Send> RateLimiter<K> for ItemExponentialRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        let mut failures = lock(&self.failures);
        let exponent = match failures.get_mut(key) {
            Some(count) => {
                let previous = *count;
                *count = count.saturating_add(1);
                previous
            }
            None => {
                failures.insert(key.clone(), 1);
                0
            }
        };
        capped_exponential(self.base, exponent, self.max)
    }

    fn forget(&self, key: &K) {
        lock(&self.failures).remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }
}

/// A global token bucket shared by all keys (client-go `BucketRateLimiter` over
/// `rate.NewLimiter(qps, burst)`).
///
/// The bucket starts full with `burst` tokens and refills at `qps` tokens per second. Every call to
/// [`when`](RateLimiter::when) takes one token, even if none is left: the balance goes negative and
/// the returned delay is the time until the balance is back at zero. Reservations therefore add
/// up: with 10 qps and burst 100, 100 immediate calls return zero, the 101st returns 100 ms, the
/// 102nd 200 ms. It keeps no per-key state: `num_requeues` is always 0 and `forget` does nothing.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::TokenBucketRateLimiter;
/// use tokio::time::Instant;
///
/// let bucket = TokenBucketRateLimiter::new(10.0, 2);
/// let now = Instant::now();
/// assert_eq!(bucket.reserve_at(now), Duration::ZERO);
/// assert_eq!(bucket.reserve_at(now), Duration::ZERO);
/// assert_eq!(bucket.reserve_at(now), Duration::from_millis(100));
/// assert_eq!(bucket.reserve_at(now), Duration::from_millis(200));
/// // A second later the bucket has refilled (10 tokens, capped at the burst of 2).
/// assert_eq!(bucket.reserve_at(now + Duration::from_secs(1)), Duration::ZERO);
/// ```
#[derive(Debug)]
pub struct TokenBucketRateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// Token balance at `last`; negative once reservations run ahead of the refill.
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` before the first reservation.
    last: Option<Instant>,
}

impl TokenBucketRateLimiter {
    /// A bucket refilling at `qps` tokens per second and holding at most `burst` tokens.
    ///
    /// # Panics
    ///
    /// If `qps` is not a finite number above zero, or `burst` is zero.
    ///
    /// ```
    /// # use informer::workqueue::TokenBucketRateLimiter;
    /// let bucket = TokenBucketRateLimiter::new(10.0, 100);
    /// ```
    pub fn new(qps: f64, burst: u32) -> Self {
        assert!(
            qps.is_finite() && qps > 0.0,
            "token bucket qps must be finite and > 0"
        );
        assert!(burst > 0, "token bucket burst must be > 0");
        let burst = f64::from(burst);
        Self {
            qps,
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: None,
            }),
        }
    }

    /// Takes one token at time `now` and returns how long the caller must wait for it
    /// (`Reserve().Delay()` in Go). [`when`](RateLimiter::when) is `reserve_at(Instant::now())`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use informer::workqueue::TokenBucketRateLimiter;
    /// # use tokio::time::Instant;
    /// let bucket = TokenBucketRateLimiter::new(1.0, 1);
    /// let t0 = Instant::now();
    /// assert_eq!(bucket.reserve_at(t0), Duration::ZERO);
    /// assert_eq!(bucket.reserve_at(t0), Duration::from_secs(1));
    /// ```
    pub fn reserve_at(&self, now: Instant) -> Duration {
        let mut state = lock(&self.state);
        // Refill for the time since the last reservation. A clock reading older than `last`
        // (possible when callers pass `now` explicitly) refills nothing, as in Go's `advance`.
        let elapsed = match state.last {
            Some(last) => now.saturating_duration_since(last),
            None => Duration::ZERO,
        };
        let refilled = (state.tokens + elapsed.as_secs_f64() * self.qps).min(self.burst);
        let tokens = refilled - 1.0;
        state.tokens = tokens;
        state.last = Some(state.last.map_or(now, |last| last.max(now)));
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / self.qps)
        }
    }
}

impl<K> RateLimiter<K> for TokenBucketRateLimiter {
    fn when(&self, _key: &K) -> Duration {
        self.reserve_at(Instant::now())
    }
    fn forget(&self, _key: &K) {}
    fn num_requeues(&self, _key: &K) -> u32 {
        0
    }
}

/// `fast` for the first `max_fast_attempts` failures of a key, `slow` afterwards (client-go
/// `ItemFastSlowRateLimiter`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::{ItemFastSlowRateLimiter, RateLimiter};
///
/// let limiter = ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 2);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(10));
/// ```
#[derive(Debug)]
pub struct ItemFastSlowRateLimiter<K> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash + Clone> ItemFastSlowRateLimiter<K> {
    /// A limiter answering `fast` for `max_fast_attempts` attempts per key, then `slow`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use informer::workqueue::ItemFastSlowRateLimiter;
    /// let limiter: ItemFastSlowRateLimiter<u64> =
    ///     ItemFastSlowRateLimiter::new(Duration::ZERO, Duration::from_secs(1), 3);
    /// ```
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone + Send> RateLimiter<K> for ItemFastSlowRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        let mut failures = lock(&self.failures);
        let count = failures.entry(key.clone()).or_insert(0);
        *count = count.saturating_add(1);
        if *count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, key: &K) {
        lock(&self.failures).remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }
}

/// The largest delay of several limiters (client-go `MaxOfRateLimiter`).
///
/// Every limiter's `when` is called on every attempt, so all of them advance; `num_requeues` is
/// the largest count, and `forget` is forwarded to all.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::{
///     ItemExponentialRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
/// };
///
/// let limiter = MaxOfRateLimiter::new(vec![
///     Box::new(ItemExponentialRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1))),
///     Box::new(ItemFastSlowRateLimiter::new(Duration::from_millis(3), Duration::from_secs(1), 1)),
/// ]);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(3)); // max(1ms, 3ms)
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(1)); // max(2ms, 1s)
/// ```
pub struct MaxOfRateLimiter<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOfRateLimiter<K> {
    /// Combines `limiters`; with none, every delay is zero.
    ///
    /// ```
    /// # use informer::workqueue::{MaxOfRateLimiter, RateLimiter};
    /// let none: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(Vec::new());
    /// assert!(none.when(&"a").is_zero());
    /// ```
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K> std::fmt::Debug for MaxOfRateLimiter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K> RateLimiter<K> for MaxOfRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        // No short-circuit: each limiter must see the attempt.
        self.limiters
            .iter()
            .map(|limiter| limiter.when(key))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, key: &K) {
        self.limiters.iter().for_each(|limiter| limiter.forget(key));
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(key))
            .max()
            .unwrap_or(0)
    }
}

/// Clamps the delay of an inner limiter to `max_delay` (client-go `WithMaxWaitRateLimiter`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::{ItemExponentialRateLimiter, MaxWaitRateLimiter, RateLimiter};
///
/// let inner = ItemExponentialRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000));
/// let limiter = MaxWaitRateLimiter::new(inner, Duration::from_secs(3));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(2));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(3)); // 4s, clamped
/// ```
#[derive(Debug)]
pub struct MaxWaitRateLimiter<L> {
    inner: L,
    max_delay: Duration,
}

impl<L> MaxWaitRateLimiter<L> {
    /// Wraps `inner` so that no delay exceeds `max_delay`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use informer::workqueue::{MaxWaitRateLimiter, TokenBucketRateLimiter};
    /// let limiter = MaxWaitRateLimiter::new(TokenBucketRateLimiter::new(1.0, 1), Duration::from_secs(5));
    /// ```
    pub fn new(inner: L, max_delay: Duration) -> Self {
        Self { inner, max_delay }
    }
}

impl<K, L: RateLimiter<K>> RateLimiter<K> for MaxWaitRateLimiter<L> {
    fn when(&self, key: &K) -> Duration {
        self.inner.when(key).min(self.max_delay)
    }
    fn forget(&self, key: &K) {
        self.inner.forget(key)
    }
    fn num_requeues(&self, key: &K) -> u32 {
        self.inner.num_requeues(key)
    }
}

/// client-go's default for controllers: the larger of a per-key exponential backoff (5 ms doubling
/// to 1000 s) and a global token bucket (10 qps, burst 100).
///
/// It is [`MaxOfRateLimiter`] over those two, with the limiters held by value instead of boxed.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::{DefaultControllerRateLimiter, RateLimiter};
///
/// let limiter = DefaultControllerRateLimiter::new();
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.num_requeues(&"a"), 2);
/// ```
#[derive(Debug)]
pub struct DefaultControllerRateLimiter<K> {
    per_key: ItemExponentialRateLimiter<K>,
    overall: TokenBucketRateLimiter,
}

impl<K: Eq + Hash + Clone> DefaultControllerRateLimiter<K> {
    /// Exponential 5 ms..1000 s per key, combined with a 10 qps / burst 100 bucket.
    ///
    /// ```
    /// # use informer::workqueue::DefaultControllerRateLimiter;
    /// let limiter: DefaultControllerRateLimiter<String> = DefaultControllerRateLimiter::new();
    /// ```
    pub fn new() -> Self {
        Self {
            per_key: ItemExponentialRateLimiter::new(
                Duration::from_millis(5),
                Duration::from_secs(1000),
            ),
            overall: TokenBucketRateLimiter::new(10.0, 100),
        }
    }
}

impl<K: Eq + Hash + Clone> Default for DefaultControllerRateLimiter<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash + Clone + Send> RateLimiter<K> for DefaultControllerRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        // Both are always consulted, as in MaxOf: the bucket spends a token per attempt.
        let per_key = self.per_key.when(key);
        let overall = RateLimiter::<K>::when(&self.overall, key);
        per_key.max(overall)
    }

    fn forget(&self, key: &K) {
        self.per_key.forget(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.per_key.num_requeues(key)
    }
}
