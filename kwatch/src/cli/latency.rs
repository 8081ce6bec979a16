//! A small log-linear latency histogram (8 buckets per power of two, so a reported percentile is
//! within 12.5 % of the true value), for the demo's lookup latencies.

use std::time::Duration;

const SUB_BUCKETS: usize = 8;
const BUCKETS: usize = 64 * SUB_BUCKETS;

/// Counts of nanosecond durations.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

fn bucket_of(nanos: u64) -> usize {
    if nanos < SUB_BUCKETS as u64 {
        return nanos as usize;
    }
    let msb = 63 - nanos.leading_zeros() as usize; // >= 3
    let sub = ((nanos >> (msb - 3)) & (SUB_BUCKETS as u64 - 1)) as usize;
    (msb - 2) * SUB_BUCKETS + sub
}

/// The largest value of a bucket.
fn upper_bound(bucket: usize) -> u64 {
    if bucket < SUB_BUCKETS {
        return bucket as u64;
    }
    let msb = bucket / SUB_BUCKETS + 2;
    let sub = (bucket % SUB_BUCKETS) as u64;
    let low = (1u64 << msb) | (sub << (msb - 3));
    low + (1u64 << (msb - 3)) - 1
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[bucket_of(nanos)] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile `q` (0..=1), as the upper bound of its bucket; zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(upper_bound(i));
            }
        }
        Duration::from_nanos(upper_bound(BUCKETS - 1))
    }
}

/// `850ns`, `1.2µs`, `3.4ms`.
pub fn human(d: Duration) -> String {
    let n = d.as_nanos();
    if n < 1_000 {
        format!("{n}ns")
    } else if n < 1_000_000 {
        format!("{:.1}µs", n as f64 / 1e3)
    } else if n < 1_000_000_000 {
        format!("{:.1}ms", n as f64 / 1e6)
    } else {
        format!("{:.2}s", n as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_within_an_eighth() {
        for v in [0u64, 1, 7, 8, 9, 15, 16, 100, 1000, 12345, 1 << 40] {
            let b = bucket_of(v);
            let hi = upper_bound(b);
            assert!(hi >= v, "{v}: {hi}");
            assert!((hi - v) as f64 <= v as f64 / 8.0 + 1.0, "{v}: {hi}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        for i in 1..=100 {
            h.record(Duration::from_nanos(i * 100));
        }
        let p50 = h.quantile(0.5).as_nanos() as f64;
        assert!((5000.0..=5700.0).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99).as_nanos() as f64;
        assert!((9900.0..=11200.0).contains(&p99), "{p99}");
    }
}
