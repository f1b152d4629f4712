//! The link's routes: each side's host route to its peer carries the TCP congestion
//! control (`RTAX_CC_ALGO`, as `ip route ... congctl` sets it), so every connection across
//! the link uses it, whatever this machine's default. A namespace may not make its
//! default one the machine does not allow (`net.ipv4.tcp_allowed_congestion_control`:
//! a machine booted with BBR allows "reno bbr"), but a route may name any the kernel has.

use std::io;
use std::net::Ipv4Addr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteMetric, RouteProtocol,
    RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// Replace the host route to `peer` through `dev` (the one its point-to-point address
/// made, from `local`) with the same route carrying the congestion control `cc`, in the
/// calling thread's namespace.
pub(super) fn peer_route_with(
    dev: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    cc: &str,
) -> io::Result<()> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let index = rustix::net::netdevice::name_to_index(&sock, dev).map_err(io::Error::from)?;
    let mut route = RouteMessage::default();
    route.header = RouteHeader {
        address_family: AddressFamily::Inet,
        destination_prefix_length: 32,
        table: RouteHeader::RT_TABLE_MAIN,
        protocol: RouteProtocol::Kernel,
        scope: RouteScope::Link,
        kind: RouteType::Unicast,
        ..RouteHeader::default()
    };
    route.attributes = vec![
        RouteAttribute::Destination(RouteAddress::Inet(peer)),
        RouteAttribute::Oif(index),
        RouteAttribute::PrefSource(RouteAddress::Inet(local)),
        RouteAttribute::Metrics(vec![RouteMetric::CcAlgo(cc.to_string())]),
    ];
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    let mut msg = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::NewRoute(route)),
    );
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    sock.send(&buf, 0)?;
    let (data, _) = sock.recv_from_full()?;
    let answer = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&data)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match answer.payload {
        NetlinkPayload::Error(e) if e.code.is_some() => Err(e.to_io()),
        _ => Ok(()),
    }
}
