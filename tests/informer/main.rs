//! The reflector, the informer, the informer-driven controller and service discovery, against the
//! simulator or a scripted server over real loopback HTTP.

#[path = "../support/mod.rs"]
mod support;

mod controller;
mod discovery;
mod discovery_balance;
mod discovery_changes;
mod factory;
mod k8s_openapi;
mod lifecycle;
mod reflector;
mod runtime;
mod writes;
