//! Configuration: kubeconfig files (checked against the real kubectl), in-cluster configuration,
//! exec credential plugins, TLS, redaction of secrets, and the simulator's and the real
//! apiserver's kubeconfigs.

#[path = "../support/mod.rs"]
mod support;

// The modules under `yaml` write their kubeconfigs in YAML (the kubectl comparisons need it);
// `json` runs with and without the feature.
#[cfg(feature = "yaml")]
mod exec;
mod incluster;
mod json;
#[cfg(feature = "yaml")]
mod kubeconfig;
#[cfg(feature = "yaml")]
mod real_apiserver;
#[cfg(feature = "yaml")]
mod redaction;
#[cfg(feature = "yaml")]
mod sim;
#[cfg(feature = "yaml")]
mod tls;
