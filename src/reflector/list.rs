//! The paginated LIST (client-go's R5-R11): the list's resourceVersion, its pages, the fallback of an
//! expired `continue` token, and what a failed list leads to.

use crate::model::Metadata;
use std::collections::HashSet;
use std::sync::Arc;

use crate::Object;
use crate::client::ListParams;
use crate::error::Error;
use crate::watch::check_key_parts;

use super::{ListSource, ListVersion, Reflector, State, version_gone};

impl<T: Object + Clone> Reflector<T> {
    /// The list's resourceVersion (R5).
    fn relist_version(&self) -> &str {
        match self.list_version {
            ListVersion::Consistent => "",
            ListVersion::LastSeen if self.last_rv.is_empty() => "0",
            ListVersion::LastSeen => &self.last_rv,
        }
    }

    /// A paginated LIST into the fifo (R5-R11).
    pub(super) async fn list(&mut self) -> State<T> {
        let rv = self.relist_version().to_owned();
        tracing::debug!(resource_version = %rv, "listing");
        // R6: with an RV other than "" or "0", a limit would make the read exact (X1): no limit,
        // so the watch cache serves it. With "0" the watch cache ignores the limit anyway. But once
        // an RV="0" list came back paginated (R7: the watch cache is off for this resource, etcd
        // answers), every list keeps paginating: an unpaginated list from etcd would be one huge
        // body.
        let limit = match rv.as_str() {
            "" | "0" => Some(self.options.page_size),
            _ if self.list_source == ListSource::Etcd => Some(self.options.page_size),
            _ => None,
        };
        let mut params = ListParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            limit,
            resource_version: Some(rv.clone()),
            ..Default::default()
        };
        if !self.fifo.begin_relist() {
            return State::Stopped;
        }
        let mut list_rv = None;
        let mut listed_objects = 0u64;
        let mut full_list_retried = false;
        // The `continue` tokens of this list so far, and its pages: a server that repeats a token
        // (or never stops giving new ones) would page for ever while the relist's key set grows.
        let mut tokens: HashSet<String> = HashSet::new();
        let mut pages = 0u32;
        loop {
            match self.api.list(&params).await {
                Ok(page) => {
                    pages += 1;
                    if list_rv.is_none() {
                        list_rv = Some(page.metadata.resource_version.clone());
                        if rv == "0" && !page.metadata.continue_token.is_empty() {
                            self.list_source = ListSource::Etcd;
                        }
                    }
                    // An object that cannot have a cache key fails its page, as one that does
                    // not decode would.
                    if let Some(e) = page.items.iter().find_map(|o| {
                        check_key_parts(o.meta().namespace(), o.meta().name(), 0).err()
                    }) {
                        return self.list_failed(e);
                    }
                    listed_objects += page.items.len() as u64;
                    let items: Vec<Arc<T>> = match page
                        .items
                        .into_iter()
                        .map(|o| self.transformed(o).map(Arc::new))
                        .collect()
                    {
                        Ok(items) => items,
                        Err(e) => return self.list_failed(e),
                    };
                    if !self.fifo.relist_page(items).await {
                        return State::Stopped;
                    }
                    if page.metadata.continue_token.is_empty() {
                        break;
                    }
                    if let Err(e) =
                        self.next_page_allowed(&mut tokens, &page.metadata.continue_token, pages)
                    {
                        return self.list_failed(e);
                    }
                    params.continue_token = Some(page.metadata.continue_token);
                    params.resource_version = None;
                    params.version_match = None;
                }
                Err(e)
                    if e.is_expired() && params.continue_token.is_some() && !full_list_retried =>
                {
                    // R8: a later page's token expired: one unpaginated list at the original RV.
                    tracing::debug!(error = %e, "continue token expired; listing without pagination");
                    full_list_retried = true;
                    list_rv = None;
                    listed_objects = 0;
                    tokens.clear();
                    pages = 0;
                    params.continue_token = None;
                    params.limit = None;
                    params.resource_version = Some(rv.clone());
                    if !self.fifo.begin_relist() {
                        return State::Stopped;
                    }
                }
                Err(e) => return self.list_failed(e),
            }
        }
        let list_rv = list_rv.unwrap_or_default();
        tracing::info!(resource_version = %list_rv, "listed");
        // Recorded before the list can complete in the fifo: whoever sees the sync (kwatch's
        // SYNCED line) reads this list's summary from the health, never the one before.
        self.listed(list_rv.to_string(), listed_objects);
        if !self.fifo.end_relist() || !self.fifo.bookmark(&list_rv) {
            return State::Stopped;
        }
        State::Watch
    }

    /// Whether a list that has read `pages` pages may follow `token` to another one: not if the
    /// list gave that token before (it would loop for ever), nor past
    /// [`ReflectorOptions::max_list_pages`](super::ReflectorOptions::max_list_pages) pages.
    fn next_page_allowed(
        &self,
        tokens: &mut HashSet<String>,
        token: &str,
        pages: u32,
    ) -> Result<(), Error> {
        if pages >= self.options.max_list_pages {
            return Err(Error::Protocol(format!(
                "the LIST gave a continue token on each of its first {pages} pages \
                 (ReflectorOptions::max_list_pages); giving it up"
            )));
        }
        if !tokens.insert(token.to_owned()) {
            return Err(Error::Protocol(format!(
                "the LIST gave a continue token it gave before (after {pages} pages): it would \
                 loop for ever; giving it up"
            )));
        }
        Ok(())
    }

    /// R9: an expired or too-new version makes the next list a consistent read, at once (routine,
    /// as after an expired watch: logged, not reported); anything else, a consistent read that
    /// failed so too included, is a failure that backs off and relists.
    fn list_failed(&mut self, e: Error) -> State<T> {
        if version_gone(&e) && self.list_version == ListVersion::LastSeen {
            tracing::debug!(error = %e, "the list's version is gone; a consistent read at once");
            self.list_version = ListVersion::Consistent;
            return State::Relist;
        }
        self.fail(&e);
        self.backoff_then(State::Relist, &e)
    }
}
