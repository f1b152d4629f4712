//! TLS on a watched connection: the ClientHello and ServerHello (SNI, version, ALPN,
//! resumed or full) and bursts of application data as an estimate of requests.

use super::conn::request_seen;
use super::conn::Conn;
use super::conn::Side;
use super::conn::TlsInfo;
use super::conn::HEAD_MAX;
use std::time::Instant;

/// Read the hellos and estimate requests from the records in `data`; false when `data`
/// held only alerts and records too small to be an exchange (a close_notify).
pub(super) fn tls(c: &mut Conn, side: Side, data: &[u8], at: Instant) -> bool {
    let info = c.tls.get_or_insert_with(TlsInfo::default);
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    // The hellos, from the kept first bytes of each direction.
    if !dir.hello_done && !dir.head.is_empty() {
        match hello(&dir.head) {
            Hello::NeedMore if dir.head.len() < HEAD_MAX => {}
            Hello::Client {
                sni,
                alpn,
                session_id,
                offered,
            } => {
                info.sni = sni;
                info.alpn_offered = alpn;
                info.offered_resumption = offered || !session_id.is_empty();
                c.client_session_id = Some(session_id);
                c.setup.hello_at = Some(at);
                dir.head = Vec::new();
                dir.hello_done = true;
            }
            Hello::Server {
                version,
                alpn,
                psk,
                session_id,
            } => {
                let v13 = version == "1.3";
                info.resumed = Some(if v13 {
                    psk
                } else {
                    !session_id.is_empty()
                        && c.client_session_id.as_deref() == Some(session_id.as_slice())
                });
                info.version = Some(version);
                info.alpn = alpn;
                dir.head = Vec::new();
                dir.hello_done = true;
            }
            _ => {
                dir.head = Vec::new();
                dir.hello_done = true;
            }
        }
    }
    // Requests, estimated: a client burst that carries an application-data record (in
    // TLS 1.3, after the client's Finished, which travels as one); a response: the
    // server's next application data.
    let v13 = info.version.as_deref().is_none_or(|v| v == "1.3");
    let hello_seen = info.version.is_some();
    let mut records = Vec::new();
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    let mut i = 0;
    while i < data.len() {
        if dir.rec_left > 0 {
            let n = dir.rec_left.min(data.len() - i);
            dir.rec_left -= n;
            i += n;
            continue;
        }
        let take = (5 - dir.rec_head.len()).min(data.len() - i);
        dir.rec_head.extend_from_slice(&data[i..i + take]);
        i += take;
        if dir.rec_head.len() == 5 {
            let len = usize::from(u16::from_be_bytes([dir.rec_head[3], dir.rec_head[4]]));
            records.push((dir.rec_head[0], len));
            dir.rec_left = len;
            dir.rec_head.clear();
        }
    }
    // In TLS 1.3 alerts (close_notify) and key updates travel as application data too,
    // in records of at most 22 bytes; an HTTP request or response is larger.
    let small = |(t, len): &(u8, usize)| *t == 0x15 || (*t == 0x17 && *len < 32);
    let exchange = records.is_empty() || !records.iter().all(small);
    handshake_end(c, side, &records, hello_seen && v13, hello_seen && !v13, at);
    for _ in records
        .into_iter()
        .filter(|(t, len)| *t == 0x17 && *len >= 32)
    {
        match side {
            Side::Client if v13 && !c.client_finished => c.client_finished = true,
            Side::Client => {
                if !c.burst_counted {
                    request_seen(c);
                    c.awaiting_response = true;
                }
            }
            Side::Server => {
                if c.awaiting_response {
                    c.awaiting_response = false;
                    c.responses += 1;
                }
            }
        }
    }
    exchange
}

/// The handshake's end, if these records of `side` end it (after the server's hello:
/// in TLS 1.3 the client's Finished, its first application-data record; in TLS 1.2 the
/// second side's ChangeCipherSpec): its duration from the ClientHello.
fn handshake_end(
    c: &mut Conn,
    side: Side,
    records: &[(u8, usize)],
    v13: bool,
    v12: bool,
    at: Instant,
) {
    const CHANGE_CIPHER_SPEC: u8 = 0x14;
    if c.setup.tls.is_some() {
        return;
    }
    let done = if v13 {
        side == Side::Client && records.iter().any(|(t, len)| *t == 0x17 && *len >= 32)
    } else if v12 && records.iter().any(|(t, _)| *t == CHANGE_CIPHER_SPEC) {
        match side {
            Side::Client => c.setup.ccs.0 = true,
            Side::Server => c.setup.ccs.1 = true,
        }
        c.setup.ccs == (true, true)
    } else {
        false
    };
    if let (true, Some(hello)) = (done, c.setup.hello_at) {
        c.setup.tls = Some(at.saturating_duration_since(hello));
    }
}

enum Hello {
    NeedMore,
    Neither,
    Client {
        sni: Option<String>,
        alpn: Option<String>,
        session_id: Vec<u8>,
        /// A pre_shared_key (1.3) or a non-empty session ticket (1.2) was offered.
        offered: bool,
    },
    Server {
        version: String,
        alpn: Option<String>,
        psk: bool,
        session_id: Vec<u8>,
    },
}

fn version_name(v: u16) -> String {
    match v {
        0x0304 => "1.3".into(),
        0x0303 => "1.2".into(),
        0x0302 => "1.1".into(),
        0x0301 => "1.0".into(),
        v => format!("0x{v:04x}"),
    }
}

fn hello(buf: &[u8]) -> Hello {
    use tls_parser::{
        parse_tls_client_hello_extensions, parse_tls_message_handshake, parse_tls_record_header,
        parse_tls_server_hello_extensions, TlsExtension, TlsMessage, TlsMessageHandshake,
        TlsRecordType,
    };
    let (rest, hdr) = match parse_tls_record_header(buf) {
        Ok(x) => x,
        Err(tls_parser::Err::Incomplete(_)) => return Hello::NeedMore,
        Err(_) => return Hello::Neither,
    };
    if hdr.record_type != TlsRecordType::Handshake {
        return Hello::Neither;
    }
    let body = &rest[..rest.len().min(usize::from(hdr.len))];
    match parse_tls_message_handshake(body) {
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ClientHello(ch)))) => {
            let mut sni = None;
            let mut alpn = None;
            let mut offered = false;
            if let Some(Ok((_, exts))) = ch.ext.map(parse_tls_client_hello_extensions) {
                for e in exts {
                    match e {
                        TlsExtension::SNI(names) => {
                            sni = names
                                .first()
                                .map(|(_, n)| String::from_utf8_lossy(n).into_owned());
                        }
                        TlsExtension::ALPN(p) => {
                            alpn = Some(
                                p.iter()
                                    .map(|p| String::from_utf8_lossy(p).into_owned())
                                    .collect::<Vec<_>>()
                                    .join(","),
                            );
                        }
                        TlsExtension::PreSharedKey(_) => offered = true,
                        TlsExtension::SessionTicket(t) if !t.is_empty() => offered = true,
                        _ => {}
                    }
                }
            }
            Hello::Client {
                sni,
                alpn,
                session_id: ch.session_id.map(<[u8]>::to_vec).unwrap_or_default(),
                offered,
            }
        }
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ServerHello(sh)))) => {
            let mut version = sh.version.0;
            let mut alpn = None;
            let mut psk = false;
            if let Some(Ok((_, exts))) = sh.ext.map(parse_tls_server_hello_extensions) {
                for e in exts {
                    match e {
                        TlsExtension::SupportedVersions(v) => {
                            if let Some(v) = v.first() {
                                version = v.0;
                            }
                        }
                        TlsExtension::ALPN(p) => {
                            alpn = p.first().map(|p| String::from_utf8_lossy(p).into_owned());
                        }
                        TlsExtension::PreSharedKey(_) => psk = true,
                        _ => {}
                    }
                }
            }
            Hello::Server {
                version: version_name(version),
                alpn,
                psk,
                session_id: sh.session_id.map(<[u8]>::to_vec).unwrap_or_default(),
            }
        }
        Err(tls_parser::Err::Incomplete(_)) if body.len() < usize::from(hdr.len) => Hello::NeedMore,
        _ => Hello::Neither,
    }
}
