//! The wire: the frame decoder and event decoder on real apiserver bytes, and the client over
//! real loopback HTTP against a raw server replaying them.

#[path = "../support/mod.rs"]
mod support;

mod frames;
mod http;
mod json_object;
mod protobuf;
