//! The causes the tool names, each judged from its evidence and said once for every
//! command that sees it (bench's diagnosis, trace, compare, doctor, audit, watch). A cause is chosen
//! only where its precondition holds: early data is TLS 1.3's, so a server that
//! negotiated TLS 1.2 is told to offer TLS 1.3 first, never to turn on early data.

use crate::report::fixes::{fix, ServerKind, Setting};

/// Why no request went in TLS 1.3 early data (0-RTT) on the connections that could have
/// carried one (new connections after the first: the first has no session to offer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoEarlyData {
    /// No handshake negotiated TLS 1.3 (`handshakes` of them, all TLS 1.2; 0 where not
    /// counted, as doctor, which asks the version once).
    Tls12 { handshakes: u64 },
    /// TLS 1.3, but no session was resumed (`full` full handshakes): early data rides on
    /// a resumed session.
    NotResumed { full: u64 },
    /// Sessions resumed (`resumed`), but their tickets allowed no early data.
    NotAllowed { resumed: u64 },
    /// Requests sent in early data (`rejected`), and the server turned each down (each
    /// was sent again after the handshake).
    Rejected { rejected: u64 },
}

impl NoEarlyData {
    /// The cause where none was accepted, from the handshakes that could have carried
    /// early data: `handshakes` in all, `tls13` of them TLS 1.3, `resumed` resumed, and
    /// `rejected` requests sent in early data and turned down.
    pub(crate) fn judge(handshakes: u64, tls13: u64, resumed: u64, rejected: u64) -> NoEarlyData {
        if tls13 == 0 && handshakes > 0 {
            NoEarlyData::Tls12 { handshakes }
        } else if rejected > 0 {
            NoEarlyData::Rejected { rejected }
        } else if resumed == 0 {
            NoEarlyData::NotResumed {
                full: handshakes.saturating_sub(resumed),
            }
        } else {
            NoEarlyData::NotAllowed { resumed }
        }
    }

    /// The finding's code: `early_data_needs_tls13` where TLS 1.2 was negotiated, else
    /// `early_data_never_accepted`.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            NoEarlyData::Tls12 { .. } => "early_data_needs_tls13",
            _ => "early_data_never_accepted",
        }
    }

    /// Why, as a clause: "the server negotiated TLS 1.2 in all 3 handshakes, and early
    /// data is TLS 1.3's".
    pub(crate) fn why(&self) -> String {
        match *self {
            NoEarlyData::Tls12 { handshakes: 0 } => {
                "the server negotiated TLS 1.2, and early data is TLS 1.3's".to_string()
            }
            NoEarlyData::Tls12 { handshakes } => format!(
                "the server negotiated TLS 1.2 in {}, and early data is TLS 1.3's",
                all(handshakes, "handshake", "handshakes")
            ),
            NoEarlyData::NotResumed { full } => format!(
                "the server resumed no session ({} full), and early data needs a resumed one",
                all(full, "handshake", "handshakes")
            ),
            NoEarlyData::NotAllowed { resumed } => format!(
                "no request went in early data: the server's session tickets allowed none ({resumed} resumed, none with early data)"
            ),
            NoEarlyData::Rejected { rejected } => format!(
                "it rejected {} sent in early data (each was sent again after the handshake)",
                if rejected == 1 {
                    "the 1 request".to_string()
                } else {
                    format!("all {rejected} requests")
                }
            ),
        }
    }

    /// Where the server sets it, for a server of `kind` (every known one's where not
    /// known): TLS 1.3 first where it negotiated TLS 1.2; none where it rejected what its
    /// own tickets allowed (its settings already allow early data).
    pub(crate) fn fix(&self, kind: Option<ServerKind>) -> Option<String> {
        match self {
            NoEarlyData::Tls12 { .. } => Some(format!(
                "offer TLS 1.3 first {}, then early data {}",
                fix(Setting::Tls13, kind),
                fix(Setting::EarlyData, kind)
            )),
            NoEarlyData::NotResumed { .. } => Some(format!(
                "resume sessions {}, then early data {}",
                fix(Setting::Resumption, kind),
                fix(Setting::EarlyData, kind)
            )),
            NoEarlyData::NotAllowed { .. } => Some(format!(
                "allow early data {}",
                fix(Setting::EarlyData, kind)
            )),
            NoEarlyData::Rejected { .. } => None,
        }
    }
}

impl NoEarlyData {
    /// The fix as the end of a sentence ("; offer TLS 1.3 first (...)"), or nothing.
    pub(crate) fn fix_clause(&self, kind: Option<ServerKind>) -> String {
        self.fix(kind).map(|f| format!("; {f}")).unwrap_or_default()
    }
}

/// Why no TLS session was resumed, as far as the side that saw it can tell: said once
/// (code, clause, fix) for bench, trace and doctor (the client's side, TLS and QUIC),
/// the audit (its own server issues tickets) and watch (the wire, where TLS 1.3 hides
/// its tickets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoResumption {
    /// A client that keeps sessions tried to resume on `tries` new connections, and the
    /// server resumed none: it issues no tickets it takes back, or keeps no cache.
    ServerGrantedNone { tries: u64 },
    /// The server issues tickets (the audit's own), and the client resumed none of its
    /// `full` handshakes: it keeps no session between connections.
    ClientOfferedNone { full: u64 },
    /// Seen on the wire: `full` full handshakes; whose part it is cannot be told.
    Unseen { full: u64 },
}

impl NoResumption {
    /// `resumption_never_granted` where the server is known to have refused, else
    /// `tls_never_resumed`.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            NoResumption::ServerGrantedNone { .. } => "resumption_never_granted",
            _ => "tls_never_resumed",
        }
    }

    /// Why, as a clause ("the server resumed none of the 19 new connections that tried
    /// to: …").
    pub(crate) fn why(&self) -> String {
        match *self {
            NoResumption::ServerGrantedNone { tries } => format!(
                "the server resumed none of the {} that tried to: it issues no session tickets or keeps no session cache",
                if tries == 1 { "1 new connection".to_string() } else { format!("{tries} new connections") }
            ),
            NoResumption::ClientOfferedNone { full } => format!(
                "the client offered no session in {}, though the server issues tickets: it keeps no TLS session between connections",
                all(full, "handshake", "handshakes")
            ),
            NoResumption::Unseen { full } => format!(
                "{} full: the client resumed no session, or the server issued none it could resume (inside TLS 1.3 the wire does not show its tickets)",
                if full == 1 { "the 1 TLS handshake was".to_string() } else { format!("all {full} TLS handshakes were") }
            ),
        }
    }

    /// What to do, as a sentence: the server's setting (for a server of `kind`, every
    /// known one's where not known), the client's way, or how to tell the two apart.
    pub(crate) fn fix(&self, kind: Option<ServerKind>) -> String {
        match self {
            NoResumption::ServerGrantedNone { .. } => format!(
                "Resume sessions on the server {}.",
                fix(Setting::Resumption, kind)
            ),
            NoResumption::ClientOfferedNone { .. } => "Keep one client (a session, an agent, a transport) for all requests, so that it keeps its TLS sessions.".to_string(),
            NoResumption::Unseen { .. } => "`handshake doctor URL` says whether the server resumes sessions.".to_string(),
        }
    }
}

/// "all 3 handshakes", "the 1 handshake".
fn all(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("the 1 {one}")
    } else {
        format!("all {n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls12_comes_before_every_other_cause_and_its_fix_is_tls13_first() {
        // Resumed TLS 1.2 sessions, no early data: TLS 1.2 is the cause.
        let c = NoEarlyData::judge(4, 0, 3, 0);
        assert_eq!(c, NoEarlyData::Tls12 { handshakes: 4 });
        assert_eq!(c.code(), "early_data_needs_tls13");
        let f = c.fix(Some(ServerKind::Nginx)).unwrap();
        assert!(
            f.starts_with("offer TLS 1.3 first (nginx: ssl_protocols TLSv1.2 TLSv1.3)"),
            "{f}"
        );
        assert_eq!(
            NoEarlyData::judge(4, 4, 3, 2),
            NoEarlyData::Rejected { rejected: 2 }
        );
        assert_eq!(NoEarlyData::Rejected { rejected: 2 }.fix(None), None);
        assert_eq!(
            NoEarlyData::judge(4, 4, 0, 0),
            NoEarlyData::NotResumed { full: 4 }
        );
        assert_eq!(
            NoEarlyData::judge(4, 4, 3, 0),
            NoEarlyData::NotAllowed { resumed: 3 }
        );
        assert!(NoEarlyData::NotAllowed { resumed: 3 }
            .fix(None)
            .unwrap()
            .contains("nginx: ssl_early_data on; HAProxy: allow-0rtt on the bind line"));
    }

    #[test]
    fn no_resumption_is_the_servers_only_where_the_client_tried() {
        let server = NoResumption::ServerGrantedNone { tries: 19 };
        assert_eq!(server.code(), "resumption_never_granted");
        assert!(server
            .why()
            .contains("none of the 19 new connections that tried"));
        assert_eq!(
            server.fix(Some(ServerKind::Nginx)),
            "Resume sessions on the server (nginx: ssl_session_cache shared:SSL:10m or ssl_session_tickets on)."
        );
        let client = NoResumption::ClientOfferedNone { full: 3 };
        assert_eq!(client.code(), "tls_never_resumed");
        assert!(client
            .why()
            .contains("the client offered no session in all 3 handshakes"));
        // From the wire, both sides are named, and how to tell them apart.
        let unseen = NoResumption::Unseen { full: 3 };
        assert!(unseen
            .why()
            .contains("the client resumed no session, or the server issued none"));
        assert!(unseen.fix(None).contains("handshake doctor URL"));
    }
}

/// Why a server let no connection carry a second request: what it did after its
/// response, said once (code, clause, fix) for bench's diagnosis, trace and doctor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerEnds {
    /// It answered HTTP/1.0 without `Connection: keep-alive`.
    Http10,
    /// It sent `Connection: close`: its keep-alive is off.
    CloseHeader,
    /// Its responses had no length (no Content-Length, not chunked): each body ended
    /// with the connection, whatever its keep-alive.
    CloseDelimited,
    /// It closed the connection after the response without a word.
    Silently,
}

impl ServerEnds {
    /// The code of "not reused, because the server ...".
    pub(crate) fn code(self) -> &'static str {
        match self {
            ServerEnds::Http10 => "not_reused_server_http10",
            ServerEnds::CloseHeader => "not_reused_server_close_header",
            ServerEnds::CloseDelimited => "not_reused_server_close_delimited",
            ServerEnds::Silently => "not_reused_server_silent_close",
        }
    }

    /// What the server did, as a clause: "the server answered HTTP/1.0 without
    /// keep-alive".
    pub(crate) fn why(self) -> &'static str {
        match self {
            ServerEnds::Http10 => "the server answered HTTP/1.0 without keep-alive",
            ServerEnds::CloseHeader => "the server sent `Connection: close` (its keep-alive is off)",
            ServerEnds::CloseDelimited => "the server sent its responses without a length (no Content-Length, not chunked) and ended each body by closing the connection",
            ServerEnds::Silently => "the server closed the connection after its response without saying so (no `Connection: close`)",
        }
    }

    /// What to change, with the directive of `server` when it is known (of every server
    /// doctor knows otherwise): keep-alive on, or a response that states its length.
    pub(crate) fn fix(self, server: Option<ServerKind>) -> String {
        match self {
            ServerEnds::CloseDelimited => {
                "Have the application (or the proxy in front) send Content-Length or a chunked body"
                    .to_string()
            }
            ServerEnds::Http10 => format!(
                "Have the server answer HTTP/1.1 with keep-alive on {}",
                fix(Setting::KeepAlive, server)
            ),
            ServerEnds::CloseHeader | ServerEnds::Silently => {
                format!("Turn keep-alive on {}", fix(Setting::KeepAlive, server))
            }
        }
    }
}

/// A reuse finding's sentence when the client's connections went to a forward proxy in
/// plain HTTP (not a tunnel): the peer that ended them is the proxy, named; and what
/// the client saw cannot tell whether the proxy ends its client connections itself or
/// passes on the origin's way (an HTTP/1.0 answer, its `Connection: close`): both are
/// said, with how to tell them apart.
pub(crate) fn through_forward_proxy(text: &str, proxy: &str, origin: &str) -> String {
    let mut t = text
        .replace("The server", &format!("The proxy {proxy}"))
        .replace("the server", &format!("the proxy {proxy}"));
    if !t.ends_with(['.', '?', '!']) {
        t.push('.');
    }
    t.push_str(&format!(
        " This is the proxy's answer to this client: the proxy either ends its client connections itself (tinyproxy does after every response; squid keeps them with `client_persistent_connections on`) or passes on the origin's answer; `handshake doctor {origin}` without the proxy says whether the origin keeps connections."
    ));
    t
}

/// Why a client let no connection carry a second request, as the server's side (audit)
/// or the wire (watch) sees it: its fix, written once for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientEnds {
    /// Its requests were HTTP/1.0 without `Connection: keep-alive`.
    Http10,
    /// Its requests carried `Connection: close`.
    CloseHeader,
    /// It closed each connection itself after the response, without asking.
    ClosedItself,
}

impl ClientEnds {
    /// What to change on the client's side, as a concept: no product's setting, for the
    /// client is not known.
    pub(crate) fn fix(self) -> &'static str {
        match self {
            ClientEnds::Http10 => "Let the client speak HTTP/1.1, or send `Connection: keep-alive` with its HTTP/1.0 requests",
            ClientEnds::CloseHeader => "Let the client keep its connections: no `Connection: close` on its requests (its HTTP library's keep-alive setting)",
            ClientEnds::ClosedItself => "Reuse one client with keep-alive (one pooled client or keep-alive agent for all the requests, each response body read to the end)",
        }
    }

    /// [`ClientEnds::fix`], then what it means for `program` (a process's name, as
    /// `/proc/PID/comm` gives it, or the software [`client_software`] found) where the
    /// program is one we know.
    pub(crate) fn fix_for(self, program: &str) -> String {
        match client_fix(self, program) {
            Some(own) => format!("{}. {own}", self.fix()),
            None => self.fix().to_string(),
        }
    }
}

/// The client software a member's connections came from: what the `User-Agent` its
/// requests sent names (a Go program keeps the name it was built with and sends
/// `Go-http-client/1.1`; a `java` process is HttpURLConnection by `Java/17` and
/// HttpClient by `Java-http-client/17`), else its process name.
pub(crate) fn client_software(program: &str, user_agent: Option<&str>) -> String {
    let ua = user_agent.unwrap_or_default().to_ascii_lowercase();
    let by_agent = [
        ("go-http-client/", "go"),
        ("java-http-client/", "java"),
        ("java/", "java-urlconnection"),
        ("python-requests/", "python"),
        ("python-urllib/", "python"),
        ("python-httpx/", "httpx"),
        ("python/", "aiohttp"),
        ("curl/", "curl"),
        ("wget/", "wget"),
        ("node", "node"),
        ("undici", "node"),
        ("ruby", "ruby"),
        ("apachebench/", "ab"),
        ("hey/", "hey"),
    ];
    by_agent
        .iter()
        .find(|(prefix, _)| ua.starts_with(prefix))
        .map_or_else(|| program.to_string(), |(_, p)| p.to_string())
}

/// How a known client program keeps its connections, by its process name (or the
/// software its `User-Agent` names), for cause `e`.
fn client_fix(e: ClientEnds, program: &str) -> Option<&'static str> {
    let p = program.to_ascii_lowercase();
    // The cause's own setting, where the program has one.
    let own = match (p.as_str(), e) {
        ("go", ClientEnds::CloseHeader) => Some("For Go: an `http.Transport` without `DisableKeepAlives: true` (with it, Go sends `Connection: close` on every request), shared by one `http.Client`"),
        ("go", _) => Some("For Go: one `http.Client` for all the requests, whose bodies are read to the end and closed"),
        ("java-urlconnection", _) => Some("For Java's HttpURLConnection: no `-Dhttp.keepAlive=false`, and each response's stream read to the end and closed"),
        ("java", ClientEnds::CloseHeader) => Some("For Java: no `Connection: close` header set on the requests, and no `-Dhttp.keepAlive=false` for HttpURLConnection; one `java.net.http.HttpClient` for all the requests"),
        ("node" | "nodejs", ClientEnds::CloseHeader) => Some("For Node: an `http.Agent({ keepAlive: true })` (the default agent since Node 19), not `agent: false`"),
        ("httpx", _) => Some("For httpx: one `httpx.Client()` for all the requests, not `httpx.get` per call"),
        ("aiohttp", _) => Some("For aiohttp: one `aiohttp.ClientSession()` for all the requests"),
        ("hey", _) => Some("For hey: without `-disable-keepalive`"),
        _ => None,
    };
    if own.is_some() {
        return own;
    }
    Some(match p.as_str() {
        p if p.starts_with("python") => "For Python: one `requests.Session()` (or one `urllib3.PoolManager()`) for all the requests, not `requests.get` or `urllib.request.urlopen` per call",
        "node" | "nodejs" => "For Node: an `http.Agent({ keepAlive: true })` (the default agent since Node 19), not `agent: false`",
        "curl" => "For curl: several URLs in one command (or one libcurl handle), without `-H 'Connection: close'`",
        "wget" => "For wget: several URLs in one command, without `--no-http-keep-alive`",
        "ruby" => "For Ruby: `Net::HTTP.start(host, port) { |http| ... }` around the requests, not `Net::HTTP.get` per call",
        "java" => "For Java: one `java.net.http.HttpClient` for all the requests",
        "ab" => "For ab: add -k",
        _ => return None,
    })
}
