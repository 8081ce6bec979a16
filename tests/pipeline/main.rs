//! The in-process pipeline without a server: the DeltaFifo, the store and its indexes, the work
//! queue and its controller.

#[path = "../support/mod.rs"]
mod support;

mod fifo_semantics;
mod fifo_stress;
mod store_concurrency;
mod store_index;
mod workqueue;
mod workqueue_controller;
