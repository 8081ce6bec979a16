//! Hazard slots: how a [`Ref`](super::Ref) tells the store's writers which object it points at
//! with plain stores to its own thread's memory, instead of a count every lookup writes.
//!
//! # Why
//! A lookup read-locks its shard (one atomic read-modify-write), finds the object and unlocks (a
//! second): each is a full barrier on x86 that later loads wait for, and once the table is cached
//! they are most of a lookup's time. The `Ref` it returns must keep the object alive after the
//! unlock without a third. Cloning the `Arc` would be one, on the object's own count (a cache line
//! that is rarely cached); so would counting live `Ref`s in the shard. Instead the lookup writes
//! the object's address into a slot of its thread's, before it unlocks, and the `Ref` writes null
//! there when it goes: two plain stores to a line no other thread writes. client-go's lookup makes
//! the same two read-modify-writes (`RLock`, `RUnlock`) and hands out a bare pointer that its
//! garbage collector keeps alive.
//!
//! # The protocol
//! - **Records.** Each thread that looks something up owns a [`Record`] of [`SLOTS`] slots,
//!   claimed on its first lookup: a record a finished thread gave back, or a new one pushed on a
//!   global list. Records are never freed, so the list grows to the most threads alive at once
//!   that had looked something up; a thread gives its record back when its thread-locals are
//!   destroyed (a thread whose destructors never run keeps it).
//! - **Protect** ([`protect`]). Under the shard's read lock, the lookup stores the object's address
//!   in a free slot of its record (one it loads as null, with acquire), with release. Only the
//!   owner stores an address into its slots, and only the `Ref` holding one stores null back. That
//!   `Ref` is usually the owner's, but one that outlives its thread's thread-locals (held by a
//!   thread-local destroyed later) clears its slot after the record went to a new owner, so the
//!   null may come from another thread. All taken (a thread holding [`SLOTS`] `Ref`s): the lookup
//!   clones the `Arc` instead.
//! - **Retire.** A writer that takes an object out of a shard's table, under its write lock,
//!   reads every slot of every record ([`protected`], acquire) and keeps an `Arc` of the object in
//!   the shard if a slot holds its address (`shard.rs`).
//! - **Release.** What a shard kept is checked again, against the slots, at the end of each of its
//!   writes, and what no slot holds is freed.
//!
//! **Invariant:** while a slot holds the address of an object that was in a shard's table when
//! the slot was written, the object is in the table or kept by the shard. The slot was written
//! inside a read-locked section of the shard; the object leaves the table only inside a
//! write-locked one, and every read-locked section before a write-locked one happens before it
//! (the lock's acquire and release). So the writer's load of the slot sees the address, or a
//! later store to the slot: the owner's null (the `Ref` went) or an address stored after it. Both
//! are release stores sequenced after the `Ref`'s reads of the object, which the writer's acquire
//! load then orders before its free; a store by a later owner of the record follows its acquire
//! load of that null, so it carries the order along. A `Ref` made after the write cannot point at
//! the object: it is no longer in the table.
//!
//! # What a live `Ref` keeps
//! Its own object, and only until its shard's next write after the `Ref` went (that write frees
//! it): at most one object per live slot, however many writes there are meanwhile. A `Ref` leaked
//! with `mem::forget` keeps its object (and its slot) for good, as a leaked `Arc` would, and any
//! later object allocated at the same address is kept when removed, until the shard's next write.
//!
//! `tests/store_loom.rs` model-checks the protocol with loom (`--cfg informer_loom`).

use std::cell::Cell;
use std::ptr;

#[cfg(informer_loom)]
use loom::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
#[cfg(not(informer_loom))]
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// Slots per thread: the `Ref`s one thread can hold at once before its lookups clone `Arc`s. Eight
/// addresses fill one cache line.
pub(super) const SLOTS: usize = 8;

/// One slot: the address of the object a [`Ref`](super::Ref) points at, or null.
pub(super) type Slot = AtomicPtr<()>;

/// One thread's slots.
#[repr(align(64))]
struct Record {
    slots: [Slot; SLOTS],
    /// Whether a live thread owns the record.
    owned: AtomicBool,
    /// The record pushed before this one; set before the record is published, never changed.
    next: Option<&'static Record>,
}

/// The most recently pushed record (the list's head); records are leaked `Box`es, never freed.
#[cfg(not(informer_loom))]
static RECORDS: AtomicPtr<Record> = AtomicPtr::new(ptr::null_mut());
#[cfg(informer_loom)]
loom::lazy_static! {
    static ref RECORDS: AtomicPtr<Record> = AtomicPtr::new(ptr::null_mut());
}

/// A thread's claim on its record: gives it back when the thread exits.
struct Owner {
    record: Cell<Option<&'static Record>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(record) = self.record.get() {
            // Release: the next owner's claim (acquire) sees every store this thread made to the
            // slots, so it skips a slot a leaked `Ref` still holds.
            record.owned.store(false, Ordering::Release);
        }
    }
}

#[cfg(not(informer_loom))]
thread_local! {
    static OWNER: Owner = const { Owner { record: Cell::new(None) } };
}
#[cfg(informer_loom)]
loom::thread_local! {
    static OWNER: Owner = Owner { record: Cell::new(None) };
}

/// Stores `object` in a free slot of this thread's record, with release, and returns the slot;
/// `None` if every slot is taken, or if the thread is exiting (its record is given back). Call it
/// under the read lock of the shard whose table holds `object`.
#[inline]
pub(super) fn protect(object: *const ()) -> Option<&'static Slot> {
    OWNER
        .try_with(|owner| {
            let record = match owner.record.get() {
                Some(record) => record,
                None => {
                    let record = claim();
                    owner.record.set(Some(record));
                    record
                }
            };
            // Acquire: the null may be another thread's, from a `Ref` that outlived the record's
            // previous owner; our store below must come after that `Ref`'s reads for a writer
            // that reads it (module docs). A plain load on x86.
            let slot = record
                .slots
                .iter()
                .find(|s| s.load(Ordering::Acquire).is_null())?;
            // Release: a writer that reads this address (or a later store) after taking the write
            // lock also sees everything before it; the lock already orders it before the write.
            slot.store(object.cast_mut(), Ordering::Release);
            Some(slot)
        })
        .ok()
        .flatten()
}

/// Empties a slot [`protect`] returned: its `Ref` is done reading the object.
#[inline]
pub(super) fn release(slot: &Slot) {
    // Release: the `Ref`'s reads of the object happen before a writer that reads this null (or a
    // later store) frees it.
    slot.store(ptr::null_mut(), Ordering::Release);
}

/// Every address a slot of any record holds now. Call it under the write lock of every shard
/// whose objects it is checked against (the invariant in the module docs).
pub(super) fn protected() -> Vec<*const ()> {
    let mut addresses = Vec::new();
    // Acquire: pairs with `push`'s release, so the record's fields are initialized.
    let mut next = head();
    while let Some(record) = next {
        for slot in &record.slots {
            // Acquire: see the module docs' invariant.
            let address = slot.load(Ordering::Acquire);
            if !address.is_null() {
                addresses.push(address.cast_const());
            }
        }
        next = record.next;
    }
    addresses
}

fn head() -> Option<&'static Record> {
    // SAFETY: `RECORDS` holds null or a record leaked by `claim`, which is never freed.
    unsafe { RECORDS.load(Ordering::Acquire).as_ref() }
}

/// A record for this thread: one given back by a finished thread, or a new one.
#[cold]
fn claim() -> &'static Record {
    let mut next = head();
    while let Some(record) = next {
        // Acquire: pairs with the previous owner's release in `Owner::drop`.
        if record
            .owned
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return record;
        }
        next = record.next;
    }
    let record: &'static mut Record = Box::leak(Box::new(Record {
        slots: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        owned: AtomicBool::new(true),
        next: None,
    }));
    let mut head = RECORDS.load(Ordering::Relaxed);
    loop {
        // SAFETY: as in `head`.
        record.next = unsafe { head.as_ref() };
        // Release: publishes the record's fields to `head`'s acquire.
        match RECORDS.compare_exchange_weak(
            head,
            ptr::from_mut(record),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return record,
            Err(now) => head = now,
        }
    }
}

#[cfg(all(test, not(informer_loom)))]
mod tests {
    use super::*;

    fn records() -> usize {
        let (mut n, mut next) = (0, head());
        while let Some(record) = next {
            n += 1;
            next = record.next;
        }
        n
    }

    /// A thread's record goes back when it exits, and the next thread takes it: threads that look
    /// things up one after another do not grow the list the writers read.
    #[test]
    fn finished_threads_give_their_records_back() {
        let before = records();
        for _ in 0..64 {
            std::thread::spawn(|| {
                let object = 1u64;
                let slot = protect(ptr::from_ref(&object).cast()).expect("a free slot");
                assert!(protected().contains(&ptr::from_ref(&object).cast()));
                release(slot);
            })
            .join()
            .unwrap();
        }
        // Other tests' threads may claim records meanwhile, but not one per thread here.
        assert!(records() < before + 32, "{before} -> {}", records());
    }

    /// The ninth `protect` on one thread finds no slot; releasing one frees it for the next.
    #[test]
    fn a_thread_has_eight_slots() {
        let objects = [0u8; SLOTS + 1];
        let slots: Vec<_> = objects[..SLOTS]
            .iter()
            .map(|o| protect(ptr::from_ref(o).cast()).expect("a free slot"))
            .collect();
        assert!(protect(ptr::from_ref(&objects[SLOTS]).cast()).is_none());
        release(slots[3]);
        let again = protect(ptr::from_ref(&objects[SLOTS]).cast()).expect("the freed slot");
        assert!(std::ptr::eq(again, slots[3]));
        for slot in slots.iter().chain([&again]) {
            release(slot);
        }
    }
}
