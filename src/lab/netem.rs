//! The kernel's netem, where the kernel has it: a veth pair between the two sides, with
//! a netem qdisc on each end (the one-way delay, jitter, loss and rate of its direction).
//! Configured with iproute2's `ip` and `tc`, run inside each namespace.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Command;

use super::delay::Shape;

const CLIENT_DEV: &str = "hs-lab-c";
const SERVER_DEV: &str = "hs-lab-s";

/// Run `program args` with its network namespace set to `ns`; its error output on failure.
fn run_in(ns: &OwnedFd, program: &str, args: &[&str]) -> Result<(), String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    crate::sys::exec::enter_network_namespace(&mut cmd, ns.as_fd(), false);
    let out = cmd.output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether netem can be attached here: tried on the loopback of `ns` (a new namespace of
/// the lab's own, so nothing else is touched). The reason when it cannot.
pub(crate) fn available(ns: &OwnedFd) -> Result<(), String> {
    run_in(
        ns,
        "tc",
        &["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
    )?;
    run_in(ns, "tc", &["qdisc", "del", "dev", "lo", "root"])
}

/// netem's arguments for one direction.
fn netem_args(shape: &Shape) -> Vec<String> {
    let mut v: Vec<String> = ["limit", "1000", "delay"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(format!("{}us", shape.one_way.as_micros()));
    if !shape.jitter.is_zero() {
        v.push(format!("{}us", shape.jitter.as_micros()));
    }
    if shape.loss > 0.0 {
        v.push("loss".into());
        v.push(format!("{}%", shape.loss * 100.0));
    }
    if let Some(bps) = shape.bandwidth_bps {
        v.push("rate".into());
        v.push(format!("{bps}bit"));
    }
    v
}

/// Join `client` and `server` by a veth pair (10.200.0.1/30 and 10.200.0.2/30) with
/// netem on both ends.
pub(crate) fn setup(client: &OwnedFd, server: &OwnedFd, shape: &Shape) -> Result<bool, String> {
    // The peer end goes straight into the server's namespace, named by our descriptor
    // (the `ip` process does not inherit it, but can open it through /proc).
    let server_ns = format!("/proc/{}/fd/{}", std::process::id(), server.as_raw_fd());
    run_in(
        client,
        "ip",
        &[
            "link", "add", CLIENT_DEV, "type", "veth", "peer", "name", SERVER_DEV, "netns",
            &server_ns,
        ],
    )?;
    let netem = netem_args(shape);
    let mut routed = true;
    for (ns, dev, local, peer) in [
        (client, CLIENT_DEV, super::CLIENT_ADDR, super::SERVER_ADDR),
        (server, SERVER_DEV, super::SERVER_ADDR, super::CLIENT_ADDR),
    ] {
        run_in(
            ns,
            "ip",
            &["addr", "add", &format!("{local}/30"), "dev", dev],
        )?;
        run_in(ns, "ip", &["link", "set", dev, "up"])?;
        // The host route to the peer carries the lab's congestion control, as the TUN
        // link's does (`route`); without it, the namespace's default.
        let cc = super::netns::CONGESTION_CONTROL;
        let route =
            super::netns::run_in(ns, || super::route::peer_route_with(dev, local, peer, cc));
        routed &= matches!(route, Ok(Ok(())));
        let mut args = vec!["qdisc", "add", "dev", dev, "root", "netem"];
        args.extend(netem.iter().map(String::as_str));
        run_in(ns, "tc", &args)?;
    }
    Ok(routed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn netem_arguments_carry_each_setting() {
        let s = Shape {
            one_way: Duration::from_millis(20),
            jitter: Duration::from_micros(1500),
            loss: 0.01,
            bandwidth_bps: Some(10_000_000),
            skew: Duration::ZERO,
        };
        assert_eq!(
            netem_args(&s).join(" "),
            "limit 1000 delay 20000us 1500us loss 1% rate 10000000bit"
        );
        let plain = Shape {
            jitter: Duration::ZERO,
            loss: 0.0,
            bandwidth_bps: None,
            ..s
        };
        assert_eq!(netem_args(&plain).join(" "), "limit 1000 delay 20000us");
    }
}
