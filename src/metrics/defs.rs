//! The families both `bench` (and `compare`) and `watch` export: each one's name, kind and
//! help, defined once, so that a scrape of either means the same thing by the same name
//! (docs/metrics.md). Their labels name what each side can see: bench a scenario and a
//! close reason, watch a client program and who closed first.

use super::{Family, Kind};

/// A family's one definition.
pub(crate) struct Def {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

impl Def {
    /// The family, without series yet.
    pub(crate) fn family(&self) -> Family {
        Family::new(self.name, self.help, self.kind)
    }
}

pub(crate) const CONNECTIONS_OPENED: Def = Def {
    name: "handshake_connections_opened",
    kind: Kind::Counter,
    help: "Connections opened.",
};

pub(crate) const CONNECTIONS_CLOSED: Def = Def {
    name: "handshake_connections_closed",
    kind: Kind::Counter,
    help: "Connections closed, by who closed them and why (bench: its close reasons; watch: who closed first, FIN or RST, and idle: the server's FIN after 1 s or more without an exchange).",
};

pub(crate) const REQUESTS: Def = Def {
    name: "handshake_requests",
    kind: Kind::Counter,
    help: "Requests answered (a response came, whatever its status; watch on TLS: estimated from the records' turns).",
};

pub(crate) const REQUESTS_REUSED: Def = Def {
    name: "handshake_requests_reused",
    kind: Kind::Counter,
    help: "Requests answered on a connection that had carried one before.",
};

pub(crate) const TLS_HANDSHAKES: Def = Def {
    name: "handshake_tls_handshakes",
    kind: Kind::Counter,
    help: "TLS handshakes completed, by kind (full or resumed; watch adds the version, read from the hellos).",
};

pub(crate) const OPEN_CONNECTIONS: Def = Def {
    name: "handshake_open_connections",
    kind: Kind::Gauge,
    help: "Connections open now.",
};

pub(crate) const REQUESTS_PER_CONNECTION: Def = Def {
    name: "handshake_requests_per_connection",
    kind: Kind::Histogram,
    help: "Requests each closed connection carried.",
};

pub(crate) const PHASE_SECONDS: Def = Def {
    name: "handshake_phase_seconds",
    kind: Kind::Histogram,
    help: "Each phase of a connection's setup and its requests (docs/timing.md), by its name: bench's for successful requests on new or reused connections; watch's connect (the SYN to the client's ACK of the SYN-ACK) and tls (the ClientHello to the last Finished), seen on the wire.",
};

#[cfg(test)]
mod tests {
    /// No family is named outside this file by the two exporters: a name written in both
    /// would be two definitions that could drift apart.
    #[test]
    fn the_shared_families_are_named_only_here() {
        let names: Vec<&str> = include_str!("defs.rs")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("name: \""))
            .map(|l| l.trim_end_matches("\","))
            .collect();
        assert_eq!(names.len(), 8, "{names:?}");
        for (file, text) in [
            ("metrics/run.rs", include_str!("run.rs")),
            ("watch/meter.rs", include_str!("../watch/meter.rs")),
        ] {
            for n in &names {
                assert!(!text.contains(&format!("\"{n}\"")), "{file} names {n}");
            }
        }
    }
}
