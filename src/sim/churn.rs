//! Workload generator (filled in below).
