//! Servers that misbehave (issue #15), over real loopback HTTP: scripted faults, silent and dead
//! connections, names that try to reach another path, and authentication failures; and what the
//! reflector must not take for misbehaviour (`routine`, issue #46).

#[path = "../support/mod.rs"]
mod support;

mod auth;
mod liveness;
mod paths;
mod reflector;
mod routine;
mod server;

/// The largest single allocation (or reallocation) the process has made, for the test that a
/// body's announced `Content-Length` is not reserved before its bytes arrive.
pub static LARGEST_ALLOCATION: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The system allocator, recording [`LARGEST_ALLOCATION`].
struct RecordingAllocator;

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl std::alloc::GlobalAlloc for RecordingAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // Relaxed: a maximum read once the allocation under test is over; it orders nothing.
        LARGEST_ALLOCATION.fetch_max(layout.size(), std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as `alloc`.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(new_size, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as `alloc`.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as `alloc`.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: RecordingAllocator = RecordingAllocator;
