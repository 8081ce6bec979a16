//! Configuration: kubeconfig files (checked against the real kubectl), in-cluster configuration,
//! exec credential plugins, TLS, redaction of secrets, and the simulator's and the real
//! apiserver's kubeconfigs.

#[path = "../support/mod.rs"]
mod support;

mod exec;
mod incluster;
mod kubeconfig;
mod real_apiserver;
mod redaction;
mod sim;
mod tls;
