//! Query parameters of LIST and WATCH requests, encoded as client-go encodes them: keys sorted,
//! `application/x-www-form-urlencoded` escaping, empty values omitted (so RV `""` sends no
//! `resourceVersion` key at all, which the apiserver reads as "a consistent read").

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// How the server interprets `resourceVersion` on a LIST (or a streaming-list WATCH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionMatch {
    /// Any version not older than the one given (served from the watch cache).
    NotOlderThan,
    /// Exactly the version given (410 if it is compacted).
    Exact,
}

impl VersionMatch {
    fn as_str(self) -> &'static str {
        match self {
            VersionMatch::NotOlderThan => "NotOlderThan",
            VersionMatch::Exact => "Exact",
        }
    }
}

/// Parameters of a LIST request (one page).
///
/// ```
/// use informer::ListParams;
/// let p = ListParams::default().labels("app in (web,api)").limit(500).resource_version("0");
/// assert_eq!(p.to_query(), "labelSelector=app+in+%28web%2Capi%29&limit=500&resourceVersion=0");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListParams {
    /// `labelSelector`: only objects whose labels match.
    pub label_selector: Option<String>,
    /// `fieldSelector`: only objects whose fields match.
    pub field_selector: Option<String>,
    /// Page size; `None` asks for everything at once.
    pub limit: Option<u32>,
    /// The token from the previous page's `metadata.continue`.
    pub continue_token: Option<String>,
    /// `""`/`None`: most recent (consistent read); `"0"`: any (cache); otherwise see `version_match`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: how `resource_version` is read.
    pub version_match: Option<VersionMatch>,
    /// `timeoutSeconds`: the server ends the request after this long.
    pub timeout_seconds: Option<u32>,
}

impl ListParams {
    /// Sets [`label_selector`](Self::label_selector).
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }
    /// Sets [`field_selector`](Self::field_selector).
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }
    /// Sets [`limit`](Self::limit): at most this many objects per page.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    /// Sets [`continue_token`](Self::continue_token): the next page of a paged list.
    pub fn continue_token(mut self, token: &str) -> Self {
        self.continue_token = Some(token.to_owned());
        self
    }
    /// Sets [`resource_version`](Self::resource_version).
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.resource_version = Some(rv.to_owned());
        self
    }
    /// Sets [`version_match`](Self::version_match).
    pub fn version_match(mut self, m: VersionMatch) -> Self {
        self.version_match = Some(m);
        self
    }

    /// The encoded query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.push("continue", self.continue_token.as_deref());
        q.push("fieldSelector", self.field_selector.as_deref());
        q.push("labelSelector", self.label_selector.as_deref());
        q.push_num("limit", self.limit);
        q.push("resourceVersion", self.resource_version.as_deref());
        q.push(
            "resourceVersionMatch",
            self.version_match.map(VersionMatch::as_str),
        );
        q.push_num("timeoutSeconds", self.timeout_seconds);
        q.finish()
    }
}

/// Parameters of a WATCH request.
///
/// ```
/// use informer::WatchParams;
/// let p = WatchParams::default().resource_version("12345").bookmarks(true).timeout(453);
/// assert_eq!(
///     p.to_query(),
///     "allowWatchBookmarks=true&resourceVersion=12345&timeoutSeconds=453&watch=true"
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchParams {
    /// `labelSelector`: only objects whose labels match.
    pub label_selector: Option<String>,
    /// `fieldSelector`: only objects whose fields match.
    pub field_selector: Option<String>,
    /// Start after this version; `None`/`""`/`"0"` start with synthetic ADDED events for the current
    /// state.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: how `resource_version` is read.
    pub version_match: Option<VersionMatch>,
    /// `allowWatchBookmarks`: ask for BOOKMARK events.
    pub allow_bookmarks: bool,
    /// The server ends the watch cleanly after this many seconds.
    pub timeout_seconds: Option<u32>,
    /// Streaming list: initial ADDED events, then a bookmark annotated `k8s.io/initial-events-end`.
    pub send_initial_events: Option<bool>,
}

impl WatchParams {
    /// Sets [`label_selector`](Self::label_selector).
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }
    /// Sets [`field_selector`](Self::field_selector).
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }
    /// Sets [`resource_version`](Self::resource_version): watch changes after this version.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.resource_version = Some(rv.to_owned());
        self
    }
    /// Sets [`allow_bookmarks`](Self::allow_bookmarks).
    pub fn bookmarks(mut self, allow: bool) -> Self {
        self.allow_bookmarks = allow;
        self
    }
    /// Sets [`timeout_seconds`](Self::timeout_seconds).
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }
    /// A streaming list (`sendInitialEvents=true&resourceVersionMatch=NotOlderThan`, bookmarks on).
    pub fn streaming_list(mut self) -> Self {
        self.send_initial_events = Some(true);
        self.version_match = Some(VersionMatch::NotOlderThan);
        self.allow_bookmarks = true;
        self
    }

    /// The encoded query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.push(
            "allowWatchBookmarks",
            self.allow_bookmarks.then_some("true"),
        );
        q.push("fieldSelector", self.field_selector.as_deref());
        q.push("labelSelector", self.label_selector.as_deref());
        q.push("resourceVersion", self.resource_version.as_deref());
        q.push(
            "resourceVersionMatch",
            self.version_match.map(VersionMatch::as_str),
        );
        q.push(
            "sendInitialEvents",
            self.send_initial_events
                .map(|b| if b { "true" } else { "false" }),
        );
        q.push_num("timeoutSeconds", self.timeout_seconds);
        q.push("watch", Some("true"));
        q.finish()
    }
}

/// What `application/x-www-form-urlencoded` leaves as it is: ASCII letters, digits and `*-._`;
/// a space becomes `+` (see [`form_encode`]), every other byte `%XX`.
const FORM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');

/// `s` encoded for a query string as HTML forms (and the WHATWG URL standard) encode it.
fn form_encode(s: &str, out: &mut String) {
    for (i, part) in s.split(' ').enumerate() {
        if i > 0 {
            out.push('+');
        }
        out.extend(utf8_percent_encode(part, FORM));
    }
}

/// Keys must be pushed in sorted order (as Go's `url.Values.Encode` writes them).
#[derive(Default)]
pub(super) struct Query(String);

impl Query {
    pub(super) fn push(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            if !self.0.is_empty() {
                self.0.push('&');
            }
            form_encode(key, &mut self.0);
            self.0.push('=');
            form_encode(v, &mut self.0);
        }
    }
    pub(super) fn push_num(&mut self, key: &str, value: Option<u32>) {
        if let Some(v) = value {
            self.push(key, Some(&v.to_string()));
        }
    }
    pub(super) fn finish(self) -> String {
        self.0
    }
}

/// Checks a namespace as the apiserver does (`ValidateNamespaceName`): a DNS-1123 label, at most
/// 63 characters of lowercase letters, digits and `-`, starting and ending with a letter or digit.
/// So no namespace can step into another path (`..`, `a/b`, `%2e`).
///
/// ```
/// use informer::client::validate_namespace;
/// assert!(validate_namespace("kube-system").is_ok());
/// assert!(validate_namespace("../secrets").is_err());
/// assert!(validate_namespace("Default").is_err());
/// ```
pub fn validate_namespace(namespace: &str) -> Result<(), String> {
    const MAX: usize = 63;
    let bytes = namespace.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let why = if bytes.is_empty() {
        Some("must not be empty".to_owned())
    } else if bytes.len() > MAX {
        Some(format!("must be no more than {MAX} characters"))
    } else if !bytes.iter().all(|b| alnum(b) || *b == b'-')
        || !alnum(&bytes[0])
        || !alnum(&bytes[bytes.len() - 1])
    {
        Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character"
                .to_owned(),
        )
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!("namespace {namespace:?}: {why}")),
    }
}

/// Checks an object name before it goes into a request path, as client-go does
/// (apimachinery's `IsValidPathSegmentName`): not empty, not `.` or `..`, no `/` and no `%`.
/// Each kind's own rule (a DNS-1123 subdomain for most, a path segment for RBAC names such as
/// `system:controller:job-controller`) is the apiserver's to apply; what passes here cannot leave
/// its path segment, and is percent-encoded in it ([`encode_path_segment`]).
///
/// ```
/// use informer::client::validate_name;
/// assert!(validate_name("web-0").is_ok());
/// assert!(validate_name("system:controller:job-controller").is_ok());
/// for bad in ["", ".", "..", "../secrets", "a/b", "%2e%2e"] {
///     assert!(validate_name(bad).is_err(), "{bad}");
/// }
/// ```
pub fn validate_name(name: &str) -> Result<(), String> {
    let why = match name {
        "" => Some("must not be empty"),
        "." | ".." => Some("may not be '.' or '..'"),
        _ if name.contains('/') => Some("may not contain '/'"),
        _ if name.contains('%') => Some("may not contain '%'"),
        _ => None,
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!("name {name:?}: {why}")),
    }
}

/// `segment` percent-encoded for a URL path: RFC 3986 unreserved characters, `:` and `@` stay,
/// every other byte becomes `%XX` (so `?`, `#`, `/`, `%`, spaces and control characters cannot
/// end the segment or the path).
///
/// ```
/// assert_eq!(informer::client::encode_path_segment("a?x=1 #b"), "a%3Fx%3D1%20%23b");
/// ```
pub fn encode_path_segment(segment: &str) -> String {
    const KEEP: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b':')
        .remove(b'@');
    utf8_percent_encode(segment, KEEP).to_string()
}
