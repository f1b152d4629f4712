//! The phases of one attempt (docs/timing.md, "Phases of one attempt"): their one list,
//! their names, which of them set up a connection, and a value per phase. Every table,
//! sum, label and series over phases is a use of this file (`tests/architecture.rs`
//! fails on a list of phase names written out anywhere else).

use std::ops::{Index, IndexMut};

use serde::ser::{Serialize, SerializeMap, Serializer};

/// One phase of an attempt, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Phase {
    /// Waiting for the intended send time (open loop) or, over HTTP/2, a stream slot.
    Blocked,
    Dns,
    Connect,
    /// Through a forward proxy: TCP to the proxy (and TLS to an https:// proxy), in
    /// place of `Connect`.
    ProxyConnect,
    /// Through a forward proxy to an https:// origin: the `CONNECT` round trip.
    Tunnel,
    Tls,
    /// HTTP/2: the client's preface sent to the server's SETTINGS received.
    H2Setup,
    /// HTTP/3: the first Initial sent to the QUIC handshake complete.
    QuicHandshake,
    Send,
    Wait,
    Receive,
    /// The attempt's start to its last body byte.
    Total,
}

/// How many phases there are.
const COUNT: usize = 12;

impl Phase {
    /// Every phase, in report order.
    pub(crate) const ALL: [Phase; COUNT] = [
        Phase::Blocked,
        Phase::Dns,
        Phase::Connect,
        Phase::ProxyConnect,
        Phase::Tunnel,
        Phase::Tls,
        Phase::H2Setup,
        Phase::QuicHandshake,
        Phase::Send,
        Phase::Wait,
        Phase::Receive,
        Phase::Total,
    ];

    /// The phases that set up a new connection: those between `blocked` and `send`; a
    /// request on a reused connection has none of them. What every command calls
    /// "setup" is their sum.
    pub(crate) const SETUP: &'static [Phase] = Phase::ALL
        .split_at(Phase::Send.index())
        .0
        .split_at(Phase::Dns.index())
        .1;

    /// The parts an attempt's time is made of: every phase but `total`, their sum.
    pub(crate) fn parts() -> impl Iterator<Item = Phase> {
        Phase::ALL.into_iter().filter(|p| *p != Phase::Total)
    }

    /// Its name in the report, the metrics' `phase` label and the docs.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Phase::Blocked => "blocked",
            Phase::Dns => "dns",
            Phase::Connect => "connect",
            Phase::ProxyConnect => "proxy_connect",
            Phase::Tunnel => "tunnel",
            Phase::Tls => "tls",
            Phase::H2Setup => "h2_setup",
            Phase::QuicHandshake => "quic_handshake",
            Phase::Send => "send",
            Phase::Wait => "wait",
            Phase::Receive => "receive",
            Phase::Total => "total",
        }
    }

    /// Its label on trace's waterfall, where the widest is set against the bars.
    pub(crate) const fn label(self) -> &'static str {
        match self {
            Phase::ProxyConnect => "proxy",
            Phase::QuicHandshake => "quic_hs",
            p => p.name(),
        }
    }

    /// The phase of this name.
    pub(crate) fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Only some runs have it (a proxy, HTTP/2, HTTP/3): a table leaves it out where
    /// no request had it.
    pub(crate) fn only_on_some_paths(self) -> bool {
        matches!(
            self,
            Phase::ProxyConnect | Phase::Tunnel | Phase::H2Setup | Phase::QuicHandshake
        )
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// One value per phase, indexed by [`Phase`]; serialized as an object keyed by the
/// phases' names, in report order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PhaseMap<T>([T; COUNT]);

impl<T: Default> Default for PhaseMap<T> {
    fn default() -> Self {
        PhaseMap(std::array::from_fn(|_| T::default()))
    }
}

impl<T> PhaseMap<T> {
    /// Each phase's value from `f`.
    pub(crate) fn from_fn(mut f: impl FnMut(Phase) -> T) -> Self {
        PhaseMap(Phase::ALL.map(&mut f))
    }

    /// Each phase with its value, in report order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Phase, &T)> {
        Phase::ALL.into_iter().zip(self.0.iter())
    }

    /// Each phase with its value to change, in report order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (Phase, &mut T)> {
        Phase::ALL.into_iter().zip(self.0.iter_mut())
    }

    /// The values of `phases`, in their order.
    pub(crate) fn of<'a>(&'a self, phases: &'a [Phase]) -> impl Iterator<Item = &'a T> + 'a {
        phases.iter().map(|p| &self[*p])
    }
}

impl<T> Index<Phase> for PhaseMap<T> {
    type Output = T;

    fn index(&self, p: Phase) -> &T {
        &self.0[p.index()]
    }
}

impl<T> IndexMut<Phase> for PhaseMap<T> {
    fn index_mut(&mut self, p: Phase) -> &mut T {
        &mut self.0[p.index()]
    }
}

impl<T: Serialize> Serialize for PhaseMap<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(COUNT))?;
        for (p, v) in self.iter() {
            m.serialize_entry(p.name(), v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::{Phase, PhaseMap};

    #[test]
    fn the_lists_agree_with_the_enum() {
        for (i, p) in Phase::ALL.into_iter().enumerate() {
            assert_eq!(p.index(), i, "{p:?} is in report order");
            assert_eq!(Phase::from_name(p.name()), Some(p));
        }
        // Setup lies between blocked and send, in report order.
        let setup: Vec<Phase> = Phase::ALL
            .into_iter()
            .filter(|p| *p > Phase::Blocked && *p < Phase::Send)
            .collect();
        assert_eq!(setup, Phase::SETUP);
        assert_eq!(Phase::parts().count(), Phase::ALL.len() - 1);
    }

    /// docs/timing.md's table lists every phase in order, and its sentence on `setup`
    /// names the setup phases, in order.
    #[test]
    fn the_docs_say_the_same_phases() {
        let doc = include_str!("../../docs/timing.md");
        let table: Vec<&str> = doc
            .lines()
            .skip_while(|l| !l.starts_with("| phase |"))
            .skip(2)
            .take_while(|l| l.starts_with("| `"))
            .filter_map(|l| l.split('`').nth(1))
            .collect();
        let all: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(table, all, "docs/timing.md's table of phases");
        let setup: Vec<&str> = Phase::SETUP.iter().map(|p| p.name()).collect();
        assert!(
            doc.contains(&format!("`setup` = {}:", setup.join(" + "))),
            "docs/timing.md says setup = {}",
            setup.join(" + ")
        );
    }

    #[test]
    fn a_map_serializes_by_name_in_order() {
        let m = PhaseMap::from_fn(|p| p as u8);
        let json = serde_json::to_string(&m).unwrap();
        assert!(
            json.starts_with(r#"{"blocked":0,"dns":1,"connect":2,"#),
            "{json}"
        );
        assert!(json.ends_with(r#""receive":10,"total":11}"#), "{json}");
        let mut m = m;
        m[Phase::Tls] = 99;
        assert_eq!(
            m.of(&[Phase::Dns, Phase::Tls]).copied().collect::<Vec<_>>(),
            [1, 99]
        );
    }
}
