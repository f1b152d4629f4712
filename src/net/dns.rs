//! Name resolution like a real client, cheaply: hickory's async resolver in-process
//! (`/etc/hosts` and `/etc/resolv.conf`, or `--dns-servers`), a run-wide cache that keeps
//! each answer for its TTL and lets concurrent new connections share one lookup
//! (`--dns-cache on`, the default), and resolver failures mapped to error details.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
    ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::{Hosts, TokioResolver};
use tokio::sync::OnceCell;

use crate::record::{ErrorDetail, ErrorKind, Failure};

/// How a run resolves names (`--dns-cache`, `--dns-servers`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DnsSettings {
    /// Keep answers for their TTL and share them between connections (off: one lookup
    /// for every new connection).
    pub no_cache: bool,
    /// Name servers to ask instead of those in /etc/resolv.conf.
    pub servers: Vec<SocketAddr>,
}

/// The system's resolver configuration, read once (`/etc/resolv.conf` or
/// `--dns-servers`, and `/etc/hosts`); each lookup runs on a hickory resolver of its own
/// built from it. Hickory keeps a cache and shares identical queries in flight within one
/// resolver: caching and sharing are [`DnsCache`]'s job, so that every lookup this tool
/// counts really went to the hosts file or a name server. Hickory spawns its background
/// work on the runtime that runs the lookup, which suits the engine's one runtime per
/// thread.
pub(crate) struct Resolver {
    config: ResolverConfig,
    opts: ResolverOpts,
    hosts: Arc<Hosts>,
}

impl Resolver {
    pub(crate) fn new(settings: &DnsSettings) -> Resolver {
        let (config, mut opts) = hickory_resolver::system_conf::read_system_conf()
            .unwrap_or_else(|_| (no_name_servers(), ResolverOpts::default()));
        let config = if settings.servers.is_empty() {
            config
        } else {
            let (domain, search, _) = config.into_parts();
            let servers = settings
                .servers
                .iter()
                .map(|a| {
                    let mut udp = ConnectionConfig::udp();
                    udp.port = a.port();
                    let mut tcp = ConnectionConfig::tcp();
                    tcp.port = a.port();
                    NameServerConfig::new(a.ip(), true, vec![udp, tcp])
                })
                .collect();
            ResolverConfig::from_parts(domain, search, servers)
        };
        opts.cache_size = 0;
        // The hosts file is read here, once, and handed to each lookup's resolver.
        opts.use_hosts_file = ResolveHosts::Never;
        // A first, AAAA only when there is no A record: one query for most names, and
        // the order getaddrinfo gives on a machine without IPv6 routes.
        opts.ip_strategy = LookupIpStrategy::Ipv4thenIpv6;
        Resolver {
            config,
            opts,
            hosts: Arc::new(Hosts::from_system().unwrap_or_default()),
        }
    }

    /// A resolver for runs whose origins all have fixed addresses: nothing is read.
    pub(crate) fn none() -> Resolver {
        Resolver {
            config: no_name_servers(),
            opts: ResolverOpts::default(),
            hosts: Arc::new(Hosts::default()),
        }
    }

    /// Ask the hosts file, then the name servers.
    pub(crate) async fn lookup(&self, host: &str) -> Result<Answer, Failure> {
        let mut resolver = TokioResolver::builder_with_config(
            self.config.clone(),
            TokioRuntimeProvider::default(),
        )
        .with_options(self.opts.clone())
        .build()
        .map_err(|e| Failure::new(ErrorKind::Dns, classify(&e)))?;
        resolver.set_hosts(self.hosts.clone());
        match resolver.lookup_ip(host).await {
            Ok(l) => {
                let addrs: Arc<[IpAddr]> = l.iter().collect();
                if addrs.is_empty() {
                    return Err(Failure::new(ErrorKind::Dns, ErrorDetail::NoAddress));
                }
                Ok(Answer {
                    addrs,
                    valid_until: l.valid_until(),
                })
            }
            Err(e) => {
                let f = Failure::new(ErrorKind::Dns, classify(&e));
                Err(match f.detail {
                    Some(ErrorDetail::NameNotFound) => {
                        f.said(format_args!("{host}: no such name (NXDOMAIN)"))
                    }
                    Some(ErrorDetail::NoAddress) => f.said(format_args!(
                        "{host}: the name has no address (no A or AAAA record)"
                    )),
                    _ => f.said(format_args!("{host}: {e}")),
                })
            }
        }
    }
}

fn no_name_servers() -> ResolverConfig {
    ResolverConfig::from_parts(None, Vec::new(), Vec::new())
}

/// The resolver's reason for a failed lookup.
fn classify(e: &NetError) -> ErrorDetail {
    match e {
        NetError::Dns(DnsError::NoRecordsFound(nr))
            if nr.response_code == ResponseCode::NXDomain =>
        {
            ErrorDetail::NameNotFound
        }
        NetError::Dns(DnsError::NoRecordsFound(_)) => ErrorDetail::NoAddress,
        NetError::Dns(DnsError::ResponseCode(ResponseCode::Refused)) => ErrorDetail::DnsRefused,
        NetError::Dns(_) => ErrorDetail::DnsServerFailure,
        NetError::Timeout => ErrorDetail::DnsNoAnswer,
        NetError::Io(_) | NetError::NoConnections => ErrorDetail::DnsUnreachable,
        _ => ErrorDetail::DnsOther,
    }
}

/// A successful lookup: the addresses, in the resolver's order, and until when the
/// shortest TTL among them allows keeping them.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub addrs: Arc<[IpAddr]>,
    pub valid_until: Instant,
}

/// How a new connection got its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// This connection asked the resolver (the `dns` phase is its time).
    Lookup,
    /// The answer was in the cache and still valid: no `dns` phase.
    CacheHit,
    /// Another connection's lookup was under way; this one waited for it (the `dns`
    /// phase is the wait).
    Joined,
}

type Slot = Arc<OnceCell<Result<Answer, Failure>>>;

/// The run-wide cache: per host, the answer of its last lookup (or the lookup under way).
/// Shared by the engine's threads; touched once per new connection, never per request.
#[derive(Default)]
pub(crate) struct DnsCache {
    slots: Mutex<HashMap<String, Slot>>,
}

impl DnsCache {
    pub(crate) fn new() -> DnsCache {
        DnsCache::default()
    }

    /// The addresses of `host` when the cache holds an answer still valid (a cache hit),
    /// without waiting: what `resolve` answers at once when it can.
    pub(crate) fn hit(&self, host: &str) -> Option<Arc<[IpAddr]>> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        fresh(slots.get(host)?)
    }

    /// The addresses of `host`: from the cache while its TTL lasts, else from one lookup
    /// that concurrent callers share. A failed lookup is not kept: the next new
    /// connection asks again.
    pub(crate) async fn resolve(
        &self,
        host: &str,
        resolver: &Resolver,
    ) -> (Result<Arc<[IpAddr]>, Failure>, Resolution) {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            match slots.get_mut(host) {
                Some(slot) => {
                    // An answer whose TTL ran out, or a failure: asked again.
                    let stale = slot.get().is_some() && fresh(slot).is_none();
                    if stale {
                        *slot = Slot::default();
                    }
                    slot.clone()
                }
                None => {
                    let slot = Slot::default();
                    slots.insert(host.to_string(), slot.clone());
                    slot
                }
            }
        };
        if let Some(Ok(a)) = slot.get() {
            return (Ok(a.addrs.clone()), Resolution::CacheHit);
        }
        let mut asked = false;
        let result = slot
            .get_or_init(|| {
                asked = true;
                resolver.lookup(host)
            })
            .await;
        let how = if asked {
            Resolution::Lookup
        } else {
            Resolution::Joined
        };
        (
            result
                .as_ref()
                .map(|a| a.addrs.clone())
                .map_err(Failure::clone),
            how,
        )
    }
}

/// A slot's addresses while its answer's TTL lasts (none for a failure, or a lookup
/// under way).
fn fresh(slot: &Slot) -> Option<Arc<[IpAddr]>> {
    match slot.get() {
        Some(Ok(a)) if a.valid_until > Instant::now() => Some(a.addrs.clone()),
        _ => None,
    }
}

/// Addresses with the port, for connecting.
pub(crate) fn with_port(addrs: &[IpAddr], port: u16) -> Vec<SocketAddr> {
    addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect()
}
