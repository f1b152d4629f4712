//! `host[:port]` as a URL, a proxy's URL, a `CONNECT` request or an absolute-form target
//! names it: the one reader of a bare authority (an IPv6 address in brackets).

/// The host (lower-case, without brackets) and the port if one is given; the error says
/// what was wrong.
pub(crate) fn split(s: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = |p: &str| format!("{p:?} is not a port");
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("an IPv6 address without its ]")?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{h:?} is not an IPv6 address"));
        }
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse::<u16>().map_err(|_| bad_port(p))?),
            None if after.is_empty() => None,
            None => return Err(format!("unexpected {after:?} after the address")),
        };
        (h, port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.parse::<u16>().map_err(|_| bad_port(p))?)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err("no host".to_string());
    }
    if port == Some(0) {
        return Err("port 0".to_string());
    }
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn hosts_ports_and_what_is_wrong() {
        let ok = |s: &str| split(s).unwrap();
        assert_eq!(ok("Example.TEST"), ("example.test".to_string(), None));
        assert_eq!(ok("a.test:8080"), ("a.test".to_string(), Some(8080)));
        assert_eq!(ok("[::1]:443"), ("::1".to_string(), Some(443)));
        assert_eq!(ok("[::1]"), ("::1".to_string(), None));
        let err = |s: &str| split(s).unwrap_err();
        assert_eq!(err("a.test:x"), "\"x\" is not a port");
        assert_eq!(err("a.test:70000"), "\"70000\" is not a port");
        assert_eq!(err("[::1"), "an IPv6 address without its ]");
        assert_eq!(err("[nope]:1"), "\"nope\" is not an IPv6 address");
        assert_eq!(err("[::1]x"), "unexpected \"x\" after the address");
        assert_eq!(err(":80"), "no host");
        assert_eq!(err("a.test:0"), "port 0");
    }
}
