//! How the client uses connections: the strategies `bench -s` and `compare` name. Part
//! of the vocabulary every layer uses (the plan, the engine, the report's shape).

/// How the client uses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Persistent HTTP/1.1 connections, reused until the server ends them.
    KeepAlive,
    /// `Connection: close`, a new connection (and full TLS handshake) per request.
    Close,
    /// A new connection per request, with TLS session resumption.
    CloseResumed,
    /// A new connection per request, resumed, with the request in TLS 1.3 early data
    /// (0-RTT) when the session's ticket allows it.
    Close0Rtt,
    /// HTTP/1.0 without a keep-alive header.
    Http10,
    /// HTTP/1.0 with `Connection: keep-alive`.
    Http10KeepAlive,
    /// HTTP/2 (ALPN over TLS, prior knowledge over cleartext): the workers share
    /// `--connections` multiplexed connections per origin.
    H2,
    /// HTTP/3 over QUIC: the workers share `--connections` connections per origin.
    H3,
    /// HTTP/3, a new QUIC connection per request with a full TLS handshake.
    H3Close,
    /// HTTP/3, a new QUIC connection per request resuming a TLS session.
    H3Resumed,
    /// HTTP/3, a new QUIC connection per request, resumed, with the request in 0-RTT.
    H3ZeroRtt,
}

impl Strategy {
    pub const ALL: [Strategy; 11] = [
        Strategy::Close,
        Strategy::CloseResumed,
        Strategy::Close0Rtt,
        Strategy::Http10,
        Strategy::Http10KeepAlive,
        Strategy::KeepAlive,
        Strategy::H2,
        Strategy::H3Close,
        Strategy::H3Resumed,
        Strategy::H3ZeroRtt,
        Strategy::H3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::KeepAlive => "keepalive",
            Strategy::Close => "close",
            Strategy::CloseResumed => "close-resumed",
            Strategy::Close0Rtt => "close-0rtt",
            Strategy::Http10 => "http10",
            Strategy::Http10KeepAlive => "http10-keepalive",
            Strategy::H2 => "h2",
            Strategy::H3 => "h3",
            Strategy::H3Close => "h3-close",
            Strategy::H3Resumed => "h3-resumed",
            Strategy::H3ZeroRtt => "h3-0rtt",
        }
    }

    /// Parse a name or a short alias.
    pub(crate) fn parse(s: &str) -> Option<Strategy> {
        Some(match s.to_ascii_lowercase().as_str() {
            "keepalive" | "keep-alive" | "ka" | "reuse" => Strategy::KeepAlive,
            "close" | "no-keepalive" | "new" => Strategy::Close,
            "close-resumed" | "resumed" | "resume" => Strategy::CloseResumed,
            "close-0rtt" | "0rtt" | "early-data" => Strategy::Close0Rtt,
            "http10" | "http1.0" | "1.0" => Strategy::Http10,
            "http10-keepalive" | "http10-ka" | "1.0-ka" => Strategy::Http10KeepAlive,
            "h2" | "http2" | "h2c" => Strategy::H2,
            "h3" | "http3" | "quic" => Strategy::H3,
            "h3-close" | "http3-close" => Strategy::H3Close,
            "h3-resumed" | "http3-resumed" => Strategy::H3Resumed,
            "h3-0rtt" | "http3-0rtt" => Strategy::H3ZeroRtt,
            _ => return None,
        })
    }

    /// What the strategy does, in one line of at most 48 characters (`--help`'s list,
    /// which fits 80 columns).
    pub fn summary(self) -> &'static str {
        match self {
            Strategy::KeepAlive => "HTTP/1.1, reused until the server closes",
            Strategy::Close => "Connection: close, a new connection per request",
            Strategy::CloseResumed => "a new connection per request, TLS resumed",
            Strategy::Close0Rtt => "close-resumed, the request in TLS early data",
            Strategy::Http10 => "HTTP/1.0, a new connection per request",
            Strategy::Http10KeepAlive => "HTTP/1.0 with Connection: keep-alive",
            Strategy::H2 => "HTTP/2, --connections shared connections",
            Strategy::H3 => "HTTP/3, --connections shared QUIC connections",
            Strategy::H3Close => "HTTP/3, a new QUIC connection per request",
            Strategy::H3Resumed => "h3-close with the TLS session resumed",
            Strategy::H3ZeroRtt => "h3-resumed, the request in 0-RTT",
        }
    }

    /// Every strategy with its one line, for `--help`.
    pub(crate) fn help_list() -> String {
        let width = Strategy::ALL
            .iter()
            .map(|s| s.name().len())
            .max()
            .unwrap_or(0);
        Strategy::ALL
            .iter()
            .map(|s| format!("  {:width$}  {}", s.name(), s.summary()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(crate) fn known_names() -> String {
        Strategy::ALL
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The protocol on the wire, as the report names it.
    pub(crate) fn protocol(self) -> &'static str {
        match self {
            Strategy::H2 => "h2",
            s if s.quic() => "h3",
            Strategy::Http10 | Strategy::Http10KeepAlive => "http/1.0",
            _ => "http/1.1",
        }
    }

    /// Whether connections are multiplexed (shared by the workers).
    pub(crate) fn multiplexed(self) -> bool {
        matches!(self, Strategy::H2 | Strategy::H3)
    }

    /// HTTP/3 over QUIC.
    pub(crate) fn quic(self) -> bool {
        matches!(
            self,
            Strategy::H3 | Strategy::H3Close | Strategy::H3Resumed | Strategy::H3ZeroRtt
        )
    }

    /// Whether the client asks to keep connections open.
    pub(crate) fn persistent(self) -> bool {
        matches!(
            self,
            Strategy::KeepAlive | Strategy::Http10KeepAlive | Strategy::H2 | Strategy::H3
        )
    }

    /// Whether the strategy is about TLS (resumption, early data) or runs over QUIC
    /// (TLS 1.3 inside): https only.
    pub(crate) fn needs_tls(self) -> bool {
        matches!(self, Strategy::CloseResumed | Strategy::Close0Rtt) || self.quic()
    }

    /// Whether the request goes in TLS 1.3 early data where the session allows it.
    pub(crate) fn early_data(self) -> bool {
        matches!(self, Strategy::Close0Rtt | Strategy::H3ZeroRtt)
    }

    /// Whether TLS session resumption is offered on new connections.
    pub(crate) fn tls_resumption(self) -> bool {
        !matches!(self, Strategy::Close | Strategy::Http10 | Strategy::H3Close)
    }
}

impl serde::Serialize for Strategy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Strategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strategy, D::Error> {
        let s = String::deserialize(d)?;
        Strategy::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown strategy {s:?} (known: {})",
                Strategy::known_names()
            ))
        })
    }
}
