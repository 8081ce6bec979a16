//! The merge rules of the module docs, as pure functions from objects to a snapshot's content.
