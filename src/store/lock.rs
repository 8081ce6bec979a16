//! A shard's lock: its readers, its pins and its writer counted in one atomic word, so that a
//! lookup that finds its object turns its read lock into a pin with a single instruction.
//!
//! # Why not std's `RwLock` beside a pin count
//! A lookup read-locks the shard, finds the object, pins it (`shard.rs`) and unlocks; its `Ref`
//! unpins later. With a `RwLock` and a separate counter that is four locked read-modify-writes,
//! each a full barrier on x86 that later loads wait for. Here the unlock and the pin are one
//! `fetch_add(PIN - READER)`, three in all (client-go's `RLock`/`RUnlock` lookup makes two).
//! Measured in the side-by-side harness (5 paired rounds, medians), a lookup went from 33.5 to
//! 30.1 ns over 10,000 Endpoints and from 51.1 to 49.3 ns over 20,000 Pods, where cache misses
//! weigh more.
//!
//! # The word
//! `state` holds, from the top bit down: `WRITER` (a writer holds or is taking the lock), the pin
//! count, and the reader count (readers inside the table now). Pins do not exclude a writer; readers
//! do. Writers also hold `gate`, a std lock: it orders writers among themselves, and a reader
//! that met a writer waits on it rather than spinning through the writer's whole batch.
//!
//! - **Read.** `fetch_add(READER)`, acquire. If `WRITER` was clear, the reader is in: every write
//!   before it released the word (below), and no writer enters until it leaves. If it was set,
//!   the reader takes its count back, waits for `gate`, and tries again.
//! - **Leave** (`fetch_sub(READER)`) or **pin** (`fetch_add(PIN - READER)`): release, so the
//!   reader's reads of the table happen before the next writer's changes.
//! - **Write.** Take `gate`, set `WRITER` (once no release holds it), then wait (spinning, then
//!   yielding, then sleeping in 20 µs steps) until the reader count is zero: readers that came
//!   before the writer's bit leave within one table probe, or one whole-store read (`list`), and
//!   readers after it back off. Unlock with `fetch_and(!WRITER)`,
//!   release, then `gate`.
//! - **Try write** (a last `Ref` freeing what was kept for it): one `compare_exchange` that sets
//!   `WRITER` if it and the reader count are clear, without the gate; it never waits. Such a
//!   release holds the lock for one `Vec` swap: a writer that meets it spins, a reader yields.
//!   Being one step on the word that also counts the pins is what lets `shard.rs` prove that a
//!   last `Ref` and a writer finishing at once do not both leave the release to the other.
//!
//! A counter that overflowed into its neighbour would corrupt the lock; a pin or reader count
//! that reaches half its field aborts the process, as `Arc` does for its count: 2^46 pins or 2^15
//! readers per shard on a 64-bit target, 2^18 pins or 2^11 readers on a 32-bit one (live `Ref`s
//! and threads inside one shard's table at once).

use std::marker::PhantomData;
use std::mem::ManuallyDrop;

#[cfg(informer_loom)]
use loom::{
    cell::{ConstPtr, MutPtr, UnsafeCell},
    sync::{
        RwLock, RwLockWriteGuard,
        atomic::{AtomicUsize, Ordering},
    },
};
#[cfg(not(informer_loom))]
use std::sync::{
    RwLock, RwLockWriteGuard,
    atomic::{AtomicUsize, Ordering},
};

#[cfg(not(informer_loom))]
use cell::{ConstPtr, MutPtr, UnsafeCell};

/// loom's `MutPtr`, read through a raw pointer as the std build's is.
#[cfg(informer_loom)]
trait AsPtr<T> {
    fn as_ptr(&self) -> *mut T;
}

#[cfg(informer_loom)]
impl<T> AsPtr<T> for MutPtr<T> {
    fn as_ptr(&self) -> *mut T {
        self.with(|p| p)
    }
}

/// Bits of the reader count: readers inside one shard's table at one instant, at most one per
/// thread.
const READER_BITS: u32 = if usize::BITS >= 64 { 16 } else { 12 };
const READER: usize = 1;
const READERS: usize = (1 << READER_BITS) - 1;
const PIN: usize = 1 << READER_BITS;
const WRITER: usize = 1 << (usize::BITS - 1);
const PINS: usize = !(READERS | WRITER);
/// Half the pin field: a count that reaches it aborts.
const PIN_LIMIT: usize = 1 << (usize::BITS - 2);

/// A lock whose readers can turn into pins: see the module docs.
pub(super) struct PinLock<T> {
    state: AtomicUsize,
    /// Held by the writer, from before it sets `WRITER` until after it clears it.
    gate: RwLock<()>,
    data: UnsafeCell<T>,
}

// SAFETY: like `RwLock<T>`: the lock hands out `&T` to many threads at once only while no `&mut T`
// exists, and `&mut T` to one thread at a time.
unsafe impl<T: Send + Sync> Sync for PinLock<T> {}
// SAFETY: owning the lock is owning the `T`.
unsafe impl<T: Send> Send for PinLock<T> {}

impl<T> PinLock<T> {
    pub(super) fn new(data: T) -> PinLock<T> {
        PinLock {
            state: AtomicUsize::new(0),
            gate: RwLock::new(()),
            data: UnsafeCell::new(data),
        }
    }

    /// Read-locks: waits while a writer holds the lock.
    #[inline]
    pub(super) fn read(&self) -> ReadGuard<'_, T> {
        let mut spins = 0;
        loop {
            // Acquire: synchronizes with the last writer's unlock (a release in this word's
            // modification order before our increment), so its changes are visible.
            let before = self.state.fetch_add(READER, Ordering::Acquire);
            if before & READERS >= READERS / 2 {
                std::process::abort();
            }
            if before & WRITER == 0 {
                return ReadGuard {
                    lock: self,
                    data: ManuallyDrop::new(self.data.get()),
                    _not_send: PhantomData,
                };
            }
            self.wait_for_writer(&mut spins);
        }
    }

    /// A reader met a writer: takes its count back and waits until the writer is done.
    #[cold]
    fn wait_for_writer(&self, spins: &mut u32) {
        // Relaxed: this reader read nothing; the writer only needs to see the count go down.
        self.state.fetch_sub(READER, Ordering::Relaxed);
        // A writer holds `gate` until after it cleared `WRITER`.
        drop(self.gate.read().unwrap_or_else(|e| e.into_inner()));
        // A release holds the lock without the gate, for one `Vec` swap: let it run.
        if self.state.load(Ordering::Relaxed) & WRITER != 0 {
            backoff(spins);
        }
    }

    /// Write-locks: waits for the writer before, then for the readers inside.
    pub(super) fn write(&self) -> WriteGuard<'_, T> {
        let gate = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let mut spins = 0u32;
        // Acquire here and in the loops: reading the count at zero synchronizes with every
        // reader's release as it left (their decrements are in this word's release sequences),
        // and reading `WRITER` clear with the last release's unlock.
        let mut state = loop {
            let state = self.state.fetch_or(WRITER, Ordering::Acquire);
            if state & WRITER == 0 {
                break state;
            }
            // A release holds the lock (`try_write`, without the gate): for one `Vec` swap.
            while self.state.load(Ordering::Relaxed) & WRITER != 0 {
                backoff(&mut spins);
            }
        };
        while state & READERS != 0 {
            backoff(&mut spins);
            state = self.state.load(Ordering::Acquire);
        }
        self.write_guard(Some(gate))
    }

    /// Write-locks if no writer holds the lock and no reader is inside; never waits. One atomic
    /// step on the word, without the gate: whoever holds the lock when this fails is seen by the
    /// same word the caller's unpin changed (the module docs of `shard.rs`).
    pub(super) fn try_write(&self) -> Option<WriteGuard<'_, T>> {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & (READERS | WRITER) != 0 {
                return None;
            }
            match self.state.compare_exchange_weak(
                state,
                state | WRITER,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(self.write_guard(None)),
                Err(now) => state = now,
            }
        }
    }

    fn write_guard<'a>(&'a self, gate: Option<RwLockWriteGuard<'a, ()>>) -> WriteGuard<'a, T> {
        WriteGuard {
            lock: self,
            data: ManuallyDrop::new(self.data.get_mut()),
            _gate: gate,
        }
    }

    /// Live pins, read with `order`.
    #[inline]
    pub(super) fn pins(&self, order: Ordering) -> usize {
        (self.state.load(order) & PINS) >> READER_BITS
    }

    /// Drops one pin made by [`ReadGuard::pin`]; returns the pins there were before.
    #[inline]
    pub(super) fn unpin(&self, order: Ordering) -> usize {
        (self.state.fetch_sub(PIN, order) & PINS) >> READER_BITS
    }
}

/// Spins a little, then yields, then sleeps in short steps: a writer waiting for readers inside
/// one table probe (or preempted there) is let in within a few spins; one waiting for a whole-store
/// read (`Store::list` holds every shard while it copies) does not keep a core busy meanwhile.
fn backoff(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    #[cfg(informer_loom)]
    loom::thread::yield_now();
    #[cfg(not(informer_loom))]
    match *spins {
        0..64 => std::hint::spin_loop(),
        64..128 => std::thread::yield_now(),
        _ => std::thread::sleep(std::time::Duration::from_micros(20)),
    }
}

/// A read lock on a [`PinLock`]: dereferences to its data. Neither `Send` nor `Sync`.
pub(super) struct ReadGuard<'a, T> {
    lock: &'a PinLock<T>,
    /// Dropped before the guard leaves (loom's tracks the access until then).
    data: ManuallyDrop<ConstPtr<T>>,
    _not_send: PhantomData<*const ()>,
}

impl<T> ReadGuard<'_, T> {
    /// Leaves the table and adds a pin, in one step; [`PinLock::unpin`] drops the pin.
    #[inline]
    pub(super) fn pin(this: Self) {
        // Not the guard's drop: that would leave a second time.
        let mut this = ManuallyDrop::new(this);
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut this.data) };
        let lock = this.lock;
        // Release: as a leaving reader's (the module docs). The pin is in the same word, so a
        // writer that reads the reader count at zero reads this pin too.
        let before = lock.state.fetch_add(PIN - READER, Ordering::Release);
        if before & PINS >= PIN_LIMIT {
            std::process::abort();
        }
    }
}

impl<T> std::ops::Deref for ReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the reader count includes this guard, so no writer is past its wait (module
        // docs) and no `&mut T` exists while the guard lives.
        unsafe { ConstPtr::deref(&self.data) }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        // Release: this reader's reads happen before the next writer's changes.
        self.lock.state.fetch_sub(READER, Ordering::Release);
    }
}

/// A write lock on a [`PinLock`]: dereferences, mutably, to its data.
pub(super) struct WriteGuard<'a, T> {
    lock: &'a PinLock<T>,
    /// Dropped before `WRITER` is cleared (loom's tracks the access until then).
    data: ManuallyDrop<MutPtr<T>>,
    /// A writer's (not a release's), released after `WRITER` is cleared (field drops run after
    /// `Drop::drop`).
    _gate: Option<RwLockWriteGuard<'a, ()>>,
}

impl<T> std::ops::Deref for WriteGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: `WRITER` is set and no reader is inside (`write`, `try_write`), and readers that
        // come meanwhile back off without reading: only this guard reaches the data, and a
        // shared reference through it excludes a `&mut` through it.
        unsafe { &*self.data.as_ptr() }
    }
}

impl<T> std::ops::DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.data.as_ptr() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        // Release: the writer's changes happen before every later reader's acquire.
        self.lock.state.fetch_and(!WRITER, Ordering::Release);
    }
}

/// std's `UnsafeCell` with loom's `get`/`get_mut` interface, so one body serves both builds (loom's
/// tracks each access, and checks that no reader and writer overlap).
#[cfg(not(informer_loom))]
mod cell {
    pub(super) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(super) fn new(data: T) -> UnsafeCell<T> {
            UnsafeCell(std::cell::UnsafeCell::new(data))
        }

        #[inline]
        pub(super) fn get(&self) -> ConstPtr<T> {
            ConstPtr(self.0.get())
        }

        pub(super) fn get_mut(&self) -> MutPtr<T> {
            MutPtr(self.0.get())
        }
    }

    pub(super) struct ConstPtr<T>(*const T);

    impl<T> ConstPtr<T> {
        /// # Safety
        /// No `&mut T` may exist while the result lives.
        #[inline]
        pub(super) unsafe fn deref(&self) -> &T {
            // SAFETY: the caller's.
            unsafe { &*self.0 }
        }
    }

    pub(super) struct MutPtr<T>(*mut T);

    impl<T> MutPtr<T> {
        pub(super) fn as_ptr(&self) -> *mut T {
            self.0
        }
    }
}
