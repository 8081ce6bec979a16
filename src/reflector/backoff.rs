//! The reflector's backoff between failed lists and watches: exponential, jittered, reset after a
//! quiet while (client-go R2/R3).
//!
//! Invariants: every failure waits at least [`BackoffOptions::initial`] (the first one included:
//! a proxy's error page is never retried at once); the steps double up to [`BackoffOptions::max`];
//! they start over only after [`BackoffOptions::reset_after`] without any failure (client-go's
//! `exponentialBackoffManagerImpl`: measured from the last delay handed out, so a server failing
//! without a pause stays at the cap). Time is the tokio clock, so a paused clock in tests moves it.

use std::time::Duration;

use tokio::time::Instant;

/// The reflector's backoff (client-go R2/R3).
#[derive(Clone, Debug)]
pub struct BackoffOptions {
    /// The first delay.
    pub initial: Duration,
    /// The longest step (before jitter). A server's Retry-After longer than this is clamped to it.
    pub max: Duration,
    /// Each delay is `d * (1 + jitter * rand[0,1))`.
    pub jitter: f64,
    /// The backoff starts over when this long has passed without a failure (since the last delay
    /// it handed out).
    pub reset_after: Duration,
}

impl Default for BackoffOptions {
    fn default() -> Self {
        BackoffOptions {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Jittered exponential backoff with a periodic reset (the reflector's; tuned through
/// [`BackoffOptions`]).
#[derive(Debug)]
pub(crate) struct Backoff {
    options: BackoffOptions,
    current: Duration,
    /// When the last delay was handed out (`None` before the first).
    last_delay: Option<Instant>,
    rng: crate::rng::Rng,
}

impl Backoff {
    /// A backoff with its own random generator, seeded for reproducible tests.
    pub(crate) fn new(options: BackoffOptions, seed: u64) -> Backoff {
        Backoff {
            current: options.initial,
            options,
            last_delay: None,
            rng: crate::rng::Rng::with_seed(seed),
        }
    }

    /// The next delay: never shorter than [`BackoffOptions::initial`], the first one included.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if self
            .last_delay
            .is_some_and(|last| now.duration_since(last) > self.options.reset_after)
        {
            self.current = self.options.initial;
        }
        self.last_delay = Some(now);
        let d = self.current.max(self.options.initial);
        self.current = (d * 2).min(self.options.max);
        d.mul_f64(1.0 + self.options.jitter * self.rng.f64())
    }
}

#[cfg(test)]
mod backoff_tests {
    use super::{Backoff, BackoffOptions};

    #[test]
    fn doubles_up_to_the_maximum() {
        let mut b = Backoff::new(
            BackoffOptions {
                jitter: 0.0,
                ..Default::default()
            },
            1,
        );
        let delays: Vec<f64> = (0..8).map(|_| b.next_delay().as_secs_f64()).collect();
        assert_eq!(delays, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn starts_over_only_after_a_quiet_while() {
        let mut b = Backoff::new(
            BackoffOptions {
                jitter: 0.0,
                ..Default::default()
            },
            1,
        );
        // Failing without a pause for longer than `reset_after`: the steps stay at the cap.
        let mut delays = Vec::new();
        for _ in 0..12 {
            let d = b.next_delay();
            delays.push(d.as_secs_f64());
            tokio::time::sleep(d).await;
        }
        assert_eq!(
            delays,
            [
                0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0, 30.0, 30.0, 30.0
            ]
        );
        // Two quiet minutes (and a bit): the next failure starts over.
        tokio::time::sleep(std::time::Duration::from_secs(121)).await;
        assert_eq!(b.next_delay().as_secs_f64(), 0.8);
        assert_eq!(b.next_delay().as_secs_f64(), 1.6);
    }
}
