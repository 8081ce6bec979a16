//! The cells: one latest-value channel per `(namespace, service, port)`, the informers behind them
//! and the handlers that recompute them.

use std::sync::Arc;

use tokio::sync::watch;

use super::{DiscoveryMetrics, DiscoveryOptions, Snapshot};
use crate::client::Client;
use crate::informer::InformerFactory;

pub(crate) struct Cache {}

impl Cache {
    pub(crate) fn new(
        client: Client,
        factory: Arc<InformerFactory>,
        options: DiscoveryOptions,
    ) -> Arc<Cache> {
        let _ = (client, factory, options);
        todo!()
    }

    pub(crate) fn instances(&self, namespace: &str, service: &str, port: &str) -> Arc<Snapshot> {
        let _ = (namespace, service, port);
        todo!()
    }

    pub(crate) fn cell(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
    ) -> watch::Sender<Arc<Snapshot>> {
        let _ = (namespace, service, port);
        todo!()
    }

    pub(crate) fn has_synced(&self, namespace: &str) -> bool {
        let _ = namespace;
        todo!()
    }

    pub(crate) async fn wait_first_compute(
        &self,
        namespace: &str,
        deadline: tokio::time::Instant,
    ) -> bool {
        let _ = (namespace, deadline);
        todo!()
    }

    pub(crate) fn metrics(&self) -> DiscoveryMetrics {
        todo!()
    }
}
