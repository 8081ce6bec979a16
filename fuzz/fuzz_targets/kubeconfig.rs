//! Arbitrary bytes through the kubeconfig parser.
//!
//! Asserts: no panic; a rejected document is an `Error::Config` whose message starts with the
//! source name, and carries a line number whenever the parser knows where the fault is; merging a
//! parsed file into itself changes nothing.
#![no_main]

use informer::Error;
use informer::config::Kubeconfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Kubeconfig::from_yaml(text) {
        Ok(parsed) => {
            let _ = format!("{parsed:?}");
            // Every name is already defined, so merging a file into itself adds nothing.
            let mut merged = parsed.clone();
            merged.merge(parsed.clone());
            assert_eq!(merged.clusters.len(), parsed.clusters.len());
            assert_eq!(merged.users.len(), parsed.users.len());
            assert_eq!(merged.contexts.len(), parsed.contexts.len());
            assert_eq!(merged.current_context, parsed.current_context);
        }
        Err(Error::Config(message)) => assert!(message.starts_with("kubeconfig"), "{message}"),
        Err(other) => panic!("not a configuration error: {other:?}"),
    }
});
