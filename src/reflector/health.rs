//! What a reflector tells about itself: its [`Phase`], the lists it completed ([`ListSummary`]) and
//! its counters ([`Health`]), read through [`Reflector::health_handle`](super::Reflector::health_handle).

use std::time::Instant;

/// What the reflector is doing, for health checks and dashboards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Listing (or streaming the initial list).
    Listing,
    /// A watch is open.
    Watching,
    /// Waiting after a failure.
    BackingOff,
    /// Stopped (shut down, or the consumer went away).
    Stopped,
}

/// What one complete list (streaming or paginated) returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListSummary {
    /// The list's resourceVersion (the streaming list's end bookmark's). Later events move the
    /// store past it; this stays the version the list was a snapshot at.
    pub resource_version: String,
    /// Objects in the complete list: after a paginated list that fell back to a full list (an
    /// expired `continue` token), the full list's count, not the sum of both attempts.
    pub objects: u64,
}

/// A snapshot of the reflector's health and counters.
#[derive(Clone, Debug)]
pub struct Health {
    /// What the reflector is doing now.
    pub phase: Phase,
    /// The newest resourceVersion seen (list, event or bookmark).
    pub resource_version: String,
    /// Failures since the last successful list or watch event.
    pub consecutive_failures: u32,
    /// The last failure, as a message.
    pub last_error: Option<String>,
    /// The HTTP status code of the last failure, when the server answered one (403 for a list
    /// that RBAC refuses, 404 for a resource the server does not serve); `None` when the last
    /// failure got no answer (transport, timeout, decode) or nothing failed. Set with
    /// [`last_error`](Self::last_error), so the two always describe the same failure.
    pub last_error_code: Option<u16>,
    /// When the last watch event (bookmarks included) arrived.
    pub last_event: Option<Instant>,
    /// Completed lists (streaming or paginated), the first one included.
    pub lists: u64,
    /// The first complete list: what a tool reports as "synced" (kwatch's `SYNCED` line).
    pub initial_list: Option<ListSummary>,
    /// The most recent complete list.
    pub last_list: Option<ListSummary>,
    /// Watches opened.
    pub watches: u64,
    /// Watch events received (bookmarks included).
    pub events: u64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            phase: Phase::Listing,
            resource_version: String::new(),
            consecutive_failures: 0,
            last_error: None,
            last_error_code: None,
            last_event: None,
            lists: 0,
            initial_list: None,
            last_list: None,
            watches: 0,
            events: 0,
        }
    }
}
