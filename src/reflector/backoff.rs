//! The reflector's backoff between failed lists and watches: exponential, jittered, reset after a
//! quiet while (client-go R2/R3).

use std::time::{Duration, Instant};

/// The reflector's backoff (client-go R2/R3).
#[derive(Clone, Debug)]
pub struct BackoffOptions {
    /// The first delay.
    pub initial: Duration,
    /// The longest step (before jitter). A server's Retry-After longer than this is clamped to it.
    pub max: Duration,
    /// Each delay is `d * (1 + jitter * rand[0,1))`.
    pub jitter: f64,
    /// The backoff starts over when this long has passed since it last did.
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
    last_reset: Instant,
    rng: crate::rng::Rng,
}

impl Backoff {
    /// A backoff with its own random generator, seeded for reproducible tests.
    pub(crate) fn new(options: BackoffOptions, seed: u64) -> Backoff {
        Backoff {
            current: options.initial,
            options,
            last_reset: Instant::now(),
            rng: crate::rng::Rng::with_seed(seed),
        }
    }

    /// The next delay.
    pub(crate) fn next_delay(&mut self) -> Duration {
        if self.last_reset.elapsed() > self.options.reset_after {
            self.current = self.options.initial;
            self.last_reset = Instant::now();
        }
        let d = self.current;
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
}
